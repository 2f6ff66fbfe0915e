"""The parallelism taxonomy in the work-depth model: each term against a hand count and, where one
exists, a published number; new knobs at their defaults change nothing; the layout sweep's skips."""

from __future__ import annotations

import dataclasses

import pytest

from rlbench.harness.perfmodel import (
    ModelArch,
    ParallelShape,
    WorkloadShape,
    from_hf_config,
    get_arch,
    get_hardware,
    predict,
)
from rlbench.harness.perfmodel import parallelism as par
from rlbench.harness.perfmodel.flops import matmul_params
from rlbench.harness.perfmodel.memory import estimate_memory
from rlbench.harness.perfmodel.stages import build_stages
from rlbench.harness.perfmodel.sweep import SKIP_CHECKS, sweep_layouts

H100 = get_hardware("H100-SXM")
QWEN7B = get_arch("Qwen2.5-7B-Instruct")  # 28 layers, hidden 3584, 28 heads, 4 KV heads of 128
MOE30B = get_arch("Qwen3-30B-A3B")
# 8 prompts x 1 sample of 512 + 512 tokens, one sequence per micro-batch: on 8 GPUs with dp = 4 each
# rank runs 2 sequences, i.e. 2 micro-batches of 1,024 tokens, in one optimizer step.
WORK = WorkloadShape(prompts_per_step=8, group_size=1, prompt_len=512, response_len=512)


def stage(layout: ParallelShape, name: str, work: WorkloadShape = WORK, arch: ModelArch = QWEN7B):
    return next(s for s in build_stages(arch, work, layout, H100) if s.name == name)


# ---- tensor parallelism --------------------------------------------------------------------------


def test_tp_all_reduces_by_hand() -> None:
    # One all-reduce of b*s*h = 1024 x 3584 x 2 B = 7,340,032 B moves 2(n-1)/n of it = 7,340,032 B at tp=2;
    # 2 per layer and pass x 28 layers x 2 micro-batches: 822,083,584 B for a forward,
    # twice that for forward + backward (2 more per layer backward).
    layout = ParallelShape(gpus=8, tp=2)
    assert stage(layout, "ref_logprob").comm_bytes["tp_all_reduce"] == 2 * 2 * 28 * 7_340_032 == 822_083_584
    assert stage(layout, "actor_update").comm_bytes["tp_all_reduce"] == 2 * 822_083_584
    assert par.tp_all_reduce_bytes(4, 1024, 3584, 2, layers=1, passes=1) == 2 * (2 * 3 / 4 * 7_340_032)


def test_a_decode_steps_tp_all_reduces_pay_nccls_latency_and_more_across_nodes(monkeypatch) -> None:
    """NCCL's cost model (src/graph/tuning.cc) for a small all-reduce, by hand: 8 ranks on NVLink, ring LL
    6.6 + 14 hops x 0.6 = 15.0 us (tree 6.8 + 2 x 7 x 0.6 = 15.2); 16 ranks over two nodes, tree LL
    6.8 + 2 x (7 x 0.6 + 1 x 5.0) = 25.2 us (ring 6.6 + 26 x 1.0 + 4 x 2.7 = 43.4). A decode step's
    2 all-reduces per layer sit between its kernels, so each decode step adds their latency to the bound."""
    from rlbench.harness.perfmodel import comm, rollout

    assert comm.all_reduce_latency_s(H100, 1) == 0.0
    assert comm.all_reduce_latency_s(H100, 8) == pytest.approx(15.0e-6)
    assert comm.all_reduce_latency_s(H100, 16) == pytest.approx(25.2e-6)
    assert comm.all_reduce_latency_s(get_hardware("GB200"), 16) < 25.2e-6  # one NVLink domain of 72
    work = WorkloadShape(prompts_per_step=16, group_size=8, prompt_len=128, response_len=256)
    timed = {}
    for latency in (True, False):
        if not latency:
            monkeypatch.setattr(rollout, "all_reduce_latency_s", lambda hw, ranks: 0.0)
        for tp in (8, 16):
            layout = ParallelShape(gpus=16, rollout_tp=tp)
            decode = rollout.decode_stage(QWEN7B, work, layout, H100, achievable=1.0)
            timed[latency, tp] = decode.time_s
    calls = 256 * 2 * 28  # decode steps x all-reduces per step
    assert timed[True, 8] - timed[False, 8] == pytest.approx(calls * 15.0e-6)
    assert timed[True, 16] - timed[False, 16] == pytest.approx(calls * 25.2e-6)


# ---- pipeline parallelism ------------------------------------------------------------------------


def test_pipeline_bubble_is_megatrons() -> None:
    """Narayanan et al. 2021 (arXiv 2104.04473), sec. 2.2.1: bubble / ideal time = (p - 1)/m for 1F1B;
    sec. 2.2.2: (1/v)(p - 1)/m for the interleaved schedule with v chunks per device."""
    assert par.pipeline_bubble_over_ideal(8, 32) == 7 / 32
    assert par.pipeline_bubble_over_ideal(8, 32, virtual=4) == pytest.approx(7 / 128)
    # as a share of the whole pipelined time: b / (1 + b) = (p-1)/(m+p-1), (p-1)/(v*m+p-1)
    assert par.pipeline_bubble_fraction(8, 32) == pytest.approx(7 / 39)
    assert par.pipeline_bubble_fraction(8, 32, virtual=4) == pytest.approx(7 / 135)
    assert par.pipeline_bubble_fraction(1, 32) == 0


def test_pipeline_depth_and_bubble_in_the_stage() -> None:
    # pp=2 on 8 GPUs: dp = 4, 2 micro-batches, 14 layers a stage = 16 units a pass, 3 passes when training.
    # 1F1B: (m + p - 1) = 3 slots -> depth 3 x 3 x 16 = 144; interleaved v=2: m + (p-1)/v = 2.5 -> 120.
    one = stage(ParallelShape(gpus=8, pp=2), "actor_update")
    inter = stage(ParallelShape(gpus=8, pp=2, pp_schedule="interleaved", pp_virtual=2), "actor_update")
    assert (one.depth, inter.depth) == (144, 120)
    slots = one.depth / (3 * 16)
    assert (slots - 2) / slots == pytest.approx(par.pipeline_bubble_fraction(2, 2))  # 1/3 of the pass idles
    # interleaving sends each micro-batch across v times as many stage boundaries
    assert inter.comm_bytes["pp_send"] == 2 * one.comm_bytes["pp_send"]
    assert "interleaved" in inter.note
    with pytest.raises(ValueError, match=r"ParallelShape\.pp_virtual"):
        ParallelShape(gpus=8, pp=2, pp_virtual=2)


# ---- context parallelism (ring attention) ---------------------------------------------------------


def test_ring_attention_bytes_by_hand() -> None:
    # cp=4 over 8,192 tokens: each rank's K and V block is 2,048 x 2 x (4 KV heads x 128) x 2 B = 4 MiB,
    # sent 3 times a layer forward = 12 MiB; backward sends K, V and dK, dV: 3x for training.
    assert par.ring_attention_bytes(4, 8192, 512, 2, layers=1, training=False) == 3 * 4 * 2**20 == 12_582_912
    assert par.ring_attention_bytes(4, 8192, 512, 2, layers=1, training=True) == 3 * 12_582_912
    assert par.ring_attention_bytes(1, 8192, 512, 2, layers=1, training=True) == 0
    # In a stage: cp=2, 2 micro-batches of 1,024 tokens, 28 layers, 1 hop of 512 x 2 x 512 x 2 B.
    assert stage(ParallelShape(gpus=8, cp=2), "ref_logprob").comm_bytes["cp_ring_kv"] == 2 * 28 * 512 * 2 * 512 * 2


def test_ring_hides_under_attention_only() -> None:
    assert par.ring_exposed_s(3.0, 1.0) == 2.0 and par.ring_exposed_s(1.0, 3.0) == 0.0
    # cp=2, ZeRO-1 (a forward pass then has no data-parallel traffic: the ring is its only collective).
    # Each GPU runs 2 sequences' halves: attention 2 x 4*28*3584*1024*1025/2 FLOPs / cp=2 at 989 TFLOP/s.
    layout = ParallelShape(gpus=8, cp=2, sharding="optimizer")
    attention_s = 2 * 4 * 28 * 3584 * 1024 * 1025 / 2 / 2 / 989e12
    ring_bytes = 2 * 28 * 512 * 2 * 512 * 2
    fast = stage(layout, "ref_logprob")
    assert fast.comm_bytes == {"cp_ring_kv": ring_bytes}
    # A link on which the ring takes twice the attention: half of it shows. All of it would, were the ring
    # serial; none, were it hidden under the whole layer (the matmuls take ~70x the attention here).
    slow_hw = dataclasses.replace(H100, intra_node_bytes_per_s=ring_bytes / (2 * attention_s))
    slow = next(s for s in build_stages(QWEN7B, WORK, layout, slow_hw) if s.name == "ref_logprob")
    assert slow.busiest_time_s - fast.busiest_time_s == pytest.approx(attention_s, rel=1e-6)
    assert fast.busiest_time_s > 2 * attention_s * 10  # the compute term, not the ring, bounds it


def test_cp_divides_activation_memory() -> None:
    work = dataclasses.replace(WORK, micro_batch_tokens=16384)
    one = estimate_memory(QWEN7B, work, ParallelShape(gpus=8), H100).breakdown_gb["activations"]
    two = estimate_memory(QWEN7B, work, ParallelShape(gpus=8, cp=2), H100).breakdown_gb["activations"]
    assert two == pytest.approx(one / 2)


# ---- expert parallelism and MoE -------------------------------------------------------------------


def test_expert_capacity_is_switch_transformers() -> None:
    """Fedus et al. 2021 (Switch Transformer), sec. 2.2: capacity = tokens / experts x capacity factor;
    its example: 6 tokens over 3 experts hold 2 a expert at factor 1.0, 3 at 1.5."""
    assert par.expert_capacity(6, 3, 1, 1.0) == 2 and par.expert_capacity(6, 3, 1, 1.5) == 3
    assert par.expert_capacity(4096, 128, 8, 1.25) == 320  # 1.25 x 4096 x 8 / 128


def test_ep_all_to_all_by_hand() -> None:
    # GShard / DeepSpeed-MoE: dispatch + combine per MoE layer forward, each tokens x top-k x h x bytes of
    # which (ep-1)/ep leaves the rank: 4,096 tokens x 8 x 2,048 x 2 B = 134,217,728 B, x 3/4, x 2.
    assert (
        par.ep_all_to_all_bytes(4, 4096, 2048, 2, experts=128, top_k=8, capacity_factor=None, moe_layers=1, passes=1)
        == 2 * 134_217_728 * 3 / 4
        == 201_326_592
    )
    # capacity factor 1.25: 128 experts x 320 slots = 40,960 token copies instead of 32,768
    padded = par.ep_all_to_all_bytes(
        4, 4096, 2048, 2, experts=128, top_k=8, capacity_factor=1.25, moe_layers=1, passes=1
    )
    assert padded == 2 * 40_960 * 2048 * 2 * 3 / 4
    # In a stage: Qwen3-30B-A3B forward, ep=4 on 8 GPUs (dp=8), 1 micro-batch of 1,024 tokens per rank, 48 layers.
    moe_work = dataclasses.replace(WORK, prompts_per_step=8)
    s = stage(ParallelShape(gpus=8, ep=4), "ref_logprob", moe_work, MOE30B)
    assert s.comm_bytes["ep_all_to_all"] == 48 * 2 * 1024 * 8 * 2048 * 2 * 3 / 4
    assert "ep_all_to_all" not in stage(ParallelShape(gpus=8, ep=4), "ref_logprob").comm_bytes  # dense: no experts


def test_experts_touched_by_a_decode_batch() -> None:
    assert par.experts_touched(128, 8, 1) == pytest.approx(8)  # one token: its top-k
    assert par.experts_touched(128, 8, 1000) == pytest.approx(128)  # a big batch: all of them
    assert par.experts_touched(4, 1, 2) == pytest.approx(4 * (1 - 0.75**2))


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        # model cards: Qwen3-30B-A3B 30.5B / 3.3B; Qwen1.5-MoE-A2.7B 14.3B / 2.7B; OLMoE paper 6.9B / 1.3B
        ("Qwen3-30B-A3B", 30.5e9, 3.3e9),
        ("Qwen1.5-MoE-A2.7B", 14.3e9, 2.7e9),
        ("OLMoE-1B-7B-0924", 6.9e9, 1.3e9),
    ],
)
def test_moe_builtins_match_their_cards(name: str, total: float, active: float) -> None:
    count = get_arch(name).param_count()
    assert count.total == pytest.approx(total, rel=0.01) and count.active == pytest.approx(active, rel=0.03)


def test_shared_experts_by_hand_and_from_config() -> None:
    moe = ModelArch(
        name="m",
        layers=2,
        hidden=8,
        heads=2,
        kv_heads=1,
        ffn=16,
        vocab=10,
        moe_experts=4,
        moe_top_k=1,
        moe_ffn=4,
        moe_shared_ffn=6,
        moe_shared_gate=True,
    )
    # per layer: attention 192 + norms 16 + router 32 + experts 4 x 96 (active 1 x 96) + shared 3x8x6 + gate 8
    assert moe.param_count().non_embedding == 2 * (192 + 16 + 32 + 384 + 144 + 8) + 8
    assert moe.param_count().non_embedding_active == 2 * (192 + 16 + 32 + 96 + 144 + 8) + 8
    assert moe.expert_params() == 2 * 384
    cfg = {
        "num_hidden_layers": 24,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "intermediate_size": 5632,
        "vocab_size": 151936,
        "model_type": "qwen2_moe",
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
    }
    assert from_hf_config(cfg).param_count() == get_arch("Qwen1.5-MoE-A2.7B").param_count()
    deepseek = {**cfg, "shared_expert_intermediate_size": None, "n_shared_experts": 2, "model_type": "deepseek_v2"}
    assert from_hf_config(deepseek).moe_shared_ffn == 2 * 1408
    with pytest.raises(ValueError, match=r"ModelArch\.moe_shared_ffn"):
        ModelArch(layers=1, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10, moe_shared_ffn=4)


def test_moe_flops_count_active_experts_memory_counts_all() -> None:
    count = MOE30B.param_count()
    assert matmul_params(MOE30B) == count.non_embedding_active + 151936 * 2048
    work = dataclasses.replace(WORK, micro_batch_tokens=16384)
    # FSDP over 8 ranks: 2 bytes for every parameter (all 128 experts) / 8
    mem = estimate_memory(MOE30B, work, ParallelShape(gpus=8), H100).breakdown_gb
    assert mem["params"] == pytest.approx(2 * count.total / 8 / 1e9)
    # the distributed optimizer keeps weights unsharded over dp, so ep=8 splits the experts 8 ways
    zero1 = estimate_memory(MOE30B, work, ParallelShape(gpus=8, sharding="optimizer", ep=8), H100).breakdown_gb
    experts = MOE30B.expert_params()
    assert zero1["params"] == pytest.approx(2 * (count.total - experts + experts / 8) / 1e9)
    assert zero1["optimizer"] == pytest.approx(12 * count.total / 8 / 1e9)


def test_expert_tensor_parallelism_folds_tp_ranks_into_ep() -> None:
    """Megatron-Core's MoE parallel folding: etp below tp lets ep take the tp ranks too."""
    work = dataclasses.replace(WORK, micro_batch_tokens=16384)
    # unset etp is tp: the layout predicts exactly as before (tp=2, ep=4 out of dp=4)
    plain = ParallelShape(gpus=8, tp=2, ep=4, sharding="optimizer")
    assert (plain.expert_tp, plain.expert_pool, plain.expert_dp) == (2, 4, 1)
    assert (
        predict(MOE30B, work, plain, H100).step_time_s
        == predict(MOE30B, work, dataclasses.replace(plain, etp=2), H100).step_time_s
    )
    # ep=8 over dp=4 needs the tp ranks: refused unless etp=1 folds them in
    with pytest.raises(ValueError, match=r"ParallelShape\.ep=8: must divide dp\*sp\*cp = 4"):
        ParallelShape(gpus=8, tp=2, ep=8)
    folded = ParallelShape(gpus=8, tp=2, ep=8, etp=1, sharding="optimizer")
    assert (folded.expert_pool, folded.expert_dp, folded.expert_stride) == (8, 1, 1)
    with pytest.raises(ValueError, match=r"ParallelShape\.etp=3: must divide tp=2"):
        ParallelShape(gpus=8, tp=2, etp=3)
    # each rank holds 128 / 8 whole experts (not split by tp) beside its half of the dense part
    count, experts = MOE30B.param_count().total, MOE30B.expert_params()
    mem = estimate_memory(MOE30B, work, folded, H100).breakdown_gb
    assert mem["params"] == pytest.approx(2 * ((count - experts) / 2 + experts / 8) / 1e9)
    # the ep group of 8 lies inside one 8-GPU node (stride 1), where tp-then-ep order would span 16 ranks
    assert stage(folded, "ref_logprob", work, MOE30B).comm_bytes["ep_all_to_all"] > 0
    wide = ParallelShape(gpus=16, tp=2, ep=8, sharding="optimizer")  # stride tp = 2: ranks 0, 2, ..., 14
    fold16 = dataclasses.replace(wide, etp=1)
    a2a = {
        name: next(c for c in stage(layout, "ref_logprob", work, MOE30B).comm if c.kind == "ep_all_to_all")
        for name, layout in (("wide", wide), ("folded", fold16))
    }
    assert a2a["wide"].bandwidth == H100.inter_node_bytes_per_s
    assert a2a["folded"].bandwidth == H100.intra_node_bytes_per_s


def test_a_ring_across_nodes_crosses_every_nic_of_a_node_and_an_all_to_all_its_own():
    """NCCL spreads a cross-node ring's channels over the node's NICs: min(NVLink, g x NIC) with g of the group's
    ranks on a node. An all-to-all sends each GPU's bytes to other nodes through its own NIC."""
    from rlbench.harness.perfmodel.comm import link_bandwidth, ring_bandwidth

    nic, nvlink = H100.inter_node_bytes_per_s, H100.intra_node_bytes_per_s
    assert ring_bandwidth(H100, 8, 1) == nvlink  # inside one node
    assert ring_bandwidth(H100, 16, 1) == min(nvlink, 8 * nic) == 400e9
    assert ring_bandwidth(H100, 4, 8) == nic  # one rank a node (stride 8): each hop leaves through a NIC
    assert ring_bandwidth(H100, 8, 2) == 4 * nic  # four ranks a node
    assert link_bandwidth(H100, 16, 1) == nic
    # a 16-GPU FSDP pass gathers over the rings; the data-parallel gather's bandwidth is the ring's
    gather = next(c for c in stage(ParallelShape(gpus=16), "ref_logprob", WORK, QWEN7B).comm if "all_gather" in c.kind)
    assert gather.bandwidth == 400e9
    a100 = get_hardware("A100-80GB")  # 8 x 200 Gb/s HDR NICs (200 GB/s together) under 300 GB/s NVLink: the NICs bind
    assert ring_bandwidth(a100, 16, 1) == min(a100.intra_node_bytes_per_s, 8 * a100.inter_node_bytes_per_s)


# ---- stage fusion ---------------------------------------------------------------------------------


def test_fusion_removes_or_merges_passes() -> None:
    plain = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)
    reused = predict(QWEN7B, WORK, ParallelShape(gpus=8, fuse=("rollout_logprobs",)), H100)
    assert reused.stage("old_logprob").flops == 0 and "generation-time" in reused.stage("old_logprob").note
    # colocated stages add: the step is shorter by exactly the pass removed
    assert plain.step_time_s - reused.step_time_s == pytest.approx(plain.stage("old_logprob").time_s)
    on_policy = predict(QWEN7B, WORK, ParallelShape(gpus=8, fuse=("on_policy_old",)), H100)
    assert on_policy.step_time_s == pytest.approx(reused.step_time_s)
    with pytest.raises(ValueError, match=r"on_policy_old.*ppo_epochs=1"):
        predict(QWEN7B, dataclasses.replace(WORK, ppo_epochs=2), ParallelShape(gpus=8, fuse=("on_policy_old",)), H100)
    # ref_old: same FLOPs in one pass; without a pipeline the time is the two passes'
    fused = predict(QWEN7B, WORK, ParallelShape(gpus=8, fuse=("ref_old",)), H100)
    assert fused.stage("ref_logprob").flops == 2 * plain.stage("ref_logprob").flops
    assert fused.stage("old_logprob").flops == 0
    assert fused.step_time_s == pytest.approx(plain.step_time_s)
    # with pp=2 the fused pass fills the pipeline once: 2m + p - 1 = 5 slots instead of 2 x 3
    piped = ParallelShape(gpus=8, pp=2)
    assert stage(dataclasses.replace(piped, fuse=("ref_old",)), "ref_logprob").depth == 5 * 16
    assert stage(piped, "ref_logprob").depth == 3 * 16
    with pytest.raises(ValueError, match=r"ParallelShape\.fuse"):
        ParallelShape(gpus=8, fuse=("rollout_logprobs", "on_policy_old"))
    with pytest.raises(ValueError, match=r"ParallelShape\.fuse"):
        ParallelShape(gpus=8, fuse=("ref_and_old",))


# ---- asynchrony -----------------------------------------------------------------------------------


def test_k_step_asynchrony_overlap_and_staleness() -> None:
    assert par.async_step_s(3.0, 2.0, 0) == 5.0 and par.async_step_s(3.0, 2.0, 4) == 3.0
    assert par.async_staleness(1.0, 2.0, 4) == 4 and par.async_staleness(3.0, 2.0, 4) == 1
    assert par.async_staleness(1.0, 2.0, 0) == 0
    split = {"gpus": 16, "placement": "disaggregated", "rollout_gpus": 8}
    off = predict(QWEN7B, WORK, ParallelShape(**split), H100)
    k = predict(QWEN7B, WORK, ParallelShape(**split, async_mode="k-step", async_staleness=3), H100)
    g = off.group_times_s
    rest = g["experience"] + g["training"] + g["sync"]
    # the engine decodes 3 batches at once, so a batch's share of the straggler tail is a third
    kg = k.group_times_s["generation"]
    assert kg < g["generation"]
    assert k.step_time_s == pytest.approx(max(kg, rest))
    assert k.staleness_steps == (3 if kg < rest else 1)
    assert k.first_step_s == pytest.approx(off.step_time_s)
    assert k.to_dict()["async"] == {"depth": 3, "staleness_steps": k.staleness_steps, "first_step_s": k.first_step_s}
    colocated = predict(QWEN7B, WORK, ParallelShape(gpus=8, async_mode="k-step", async_staleness=2), H100)
    assert any("ignored for timing" in n for n in colocated.notes)
    with pytest.raises(ValueError, match=r"ParallelShape\.async_staleness"):
        ParallelShape(gpus=8, async_staleness=2)


# ---- defaults unchanged ---------------------------------------------------------------------------

# Step times of the model before this change (commit d2a45c2, `git show d2a45c2:harness/perfmodel/...`),
# Qwen2.5-7B on H100, 256 x (512 + 1024) tokens: new knobs at their defaults must reproduce them to the bit.
# The 16-GPU layout's rollout_tp=4 engines pay their TP all-reduces' latency since issue 37 (comm.py: 1024 decode
# steps x 56 all-reduces x 10.2 us = 0.585 s, and 56 more for the prefill): PINNED_16 = 3.2767971243982945 + that.
# Prefix sharing is by whole KV blocks since issue 37 (rollout.unshared_prompt_len): each of a prompt's 7 other
# samples prefills its last 16-token block (512 is block-aligned and a cache hit stops at token 511), +6.0 ms on
# 8 GPUs and +3.0 ms on the 16-GPU layout over the pins 10.02643516357583 and 3.862277124398295.
PINNED_8 = 10.03246974555818
PINNED_16 = 3.86529441538947


def test_new_knobs_at_defaults_change_nothing() -> None:
    work = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)
    for kwargs in (
        {"gpus": 8},
        {"gpus": 16, "tp": 2, "pp": 2, "sp": 2, "rollout_tp": 4, "sharding": "optimizer"},
        {"gpus": 16, "placement": "disaggregated", "rollout_gpus": 8, "async_mode": "one-step"},
    ):
        plain = predict(QWEN7B, work, ParallelShape(**kwargs), H100).to_dict()
        explicit = ParallelShape(
            **kwargs, cp=1, ep=1, pp_schedule="1f1b", pp_virtual=1, fuse=(), ep_capacity_factor=None
        )
        assert predict(QWEN7B, work, explicit, H100).to_dict() == plain
    # pinned from the code before this change (git show d2a45c2:harness/perfmodel), Qwen2.5-7B on H100
    assert predict(QWEN7B, work, ParallelShape(gpus=8), H100).step_time_s == PINNED_8
    layout = ParallelShape(gpus=16, tp=2, pp=2, sp=2, rollout_tp=4, sharding="optimizer")
    assert predict(QWEN7B, work, layout, H100).step_time_s == PINNED_16


# ---- the layout sweep -----------------------------------------------------------------------------


def test_sweep_ranks_and_names_each_skip() -> None:
    work = WorkloadShape(prompts_per_step=64, group_size=8, prompt_len=512, response_len=2048, micro_batch_tokens=16384)
    result = sweep_layouts(
        MOE30B,
        work,
        H100,
        16,
        tp=(1, 4, 8),
        pp=(1, 2, 5),
        cp=(1, 3),
        ep=(1, 3, 8),
        rollout_tp=(4,),
        placements=("colocated", "disaggregated"),
    )
    reasons = {s.check: s.reason for s in result.skipped}
    assert set(reasons) == set(SKIP_CHECKS)  # every kind of refusal occurs in this grid
    assert "ep=3 does not divide Qwen3-30B-A3B's 128 experts" in reasons["experts"]
    assert "tp=8 does not divide Qwen3-30B-A3B's 4 KV heads" in reasons["heads"]
    assert "pp=5 does not divide Qwen3-30B-A3B's 48 layers" in reasons["layers"]
    assert any("cp = 3 must divide" in s.reason or "*cp" in s.reason for s in result.skipped if s.check == "gpus")
    assert "more than H100-SXM's 80 GB" in reasons["memory"]
    times = [p.step_time_s for _, p in result.ranked]
    assert result.ranked and times == sorted(times)
    assert all(p.memory.fits for _, p in result.ranked)
    assert len(result.ranked) + len(result.skipped) == 3 * 3 * 2 * 3 * 2
    row = result.rows()[0]
    assert row["rank"] == 1 and row["step_time_bound_s"] == times[0] and row["memory_per_gpu_gb"] > 0
    seen: list[str] = []
    sweep_layouts(
        MOE30B,
        work,
        H100,
        16,
        tp=(4,),
        pp=(2,),
        cp=(1,),
        ep=(1,),
        rollout_tp=(4,),
        shape_for=lambda layout: seen.append(layout.placement) or work,
    )
    assert seen == ["colocated", "disaggregated"]
    dense = sweep_layouts(
        QWEN7B, work, H100, 8, tp=(1,), pp=(1,), cp=(1,), ep=(2,), rollout_tp=(1,), placements=("colocated",)
    )
    assert [s.check for s in dense.skipped] == ["experts"] and "is dense" in dense.skipped[0].reason
