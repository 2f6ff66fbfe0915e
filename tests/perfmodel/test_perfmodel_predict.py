"""Step predictions: roofline regimes, scaling, the async DAG, Brent bounds, memory, cost, output keys."""

from __future__ import annotations

import dataclasses

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, get_hardware, predict

WORK = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)
QWEN7B, H100 = "Qwen2.5-7B-Instruct", "H100-SXM"


def test_decode_memory_bound_prefill_compute_bound_7b_h100() -> None:
    p = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)  # 32 sequences per engine
    decode, prefill = p.stage("generation_decode"), p.stage("generation_prefill")
    assert decode.bound == "memory" and decode.memory_time_s > 5 * decode.compute_time_s
    assert prefill.bound == "compute" and prefill.compute_time_s > 2 * prefill.memory_time_s
    # one decode step cannot beat streaming the weights: 1024 steps x 15.2 GB / 3.35 TB/s
    assert decode.time_s >= 1024 * 15.23e9 / 3.35e12


def test_fsdp_small_micro_batches_comm_bound_packed_compute_bound() -> None:
    # One 1536-token sequence per micro-batch: FSDP re-gathers 15 GB of weights three times per
    # ~70 ms of math, so the update waits on NVLink; 16k-token packed micro-batches amortise it.
    small = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100).stage("actor_update")
    packed = predict(QWEN7B, dataclasses.replace(WORK, micro_batch_tokens=16384), ParallelShape(gpus=8), H100)
    actor = packed.stage("actor_update")
    assert small.bound == "comm" and actor.bound == "compute"
    assert actor.flops == small.flops and actor.time_s < small.time_s
    n = 6.525e9 + 152064 * 3584  # non-embedding + LM head
    tokens = WORK.sequences * WORK.mean_seq_len
    assert actor.flops == pytest.approx(6 * n * tokens, rel=0.05)  # attention adds a few percent


def test_doubling_dp_halves_train_compute_time() -> None:
    small = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100).stage("actor_update")
    big = predict(QWEN7B, WORK, ParallelShape(gpus=16), H100).stage("actor_update")
    assert small.compute_time_s / big.compute_time_s == pytest.approx(2.0, rel=0.01)
    assert small.flops == big.flops


def test_one_step_async_not_slower_than_sync() -> None:
    split = ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=8)
    sync = predict(QWEN7B, WORK, split, H100)
    overlap = predict(QWEN7B, WORK, dataclasses.replace(split, async_mode="one-step"), H100)
    assert overlap.step_time_s <= sync.step_time_s
    g = sync.group_times_s
    assert overlap.step_time_s == pytest.approx(max(g["generation"], g["experience"] + g["training"] + g["sync"]))
    assert sync.step_time_s == pytest.approx(sum(g.values()))


def test_colocated_async_adds_and_says_so() -> None:
    sync = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)
    asyn = predict(QWEN7B, WORK, ParallelShape(gpus=8, async_mode="one-step"), H100)
    assert asyn.step_time_s == pytest.approx(sync.step_time_s)
    assert any("ignored" in note for note in asyn.notes)


@pytest.mark.parametrize(
    "parallel",
    [
        ParallelShape(gpus=8),
        ParallelShape(gpus=16, tp=2, pp=2, sp=2),
        ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=4, async_mode="one-step"),
    ],
)
def test_brent_lower_not_above_upper(parallel: ParallelShape) -> None:
    work = dataclasses.replace(WORK, fixed_length=False, mean_response_len=400.0, algorithm="ppo", group_size=1)
    # The datasheet row states no op latency: no span, so no upper bound (None, not a guess) and the
    # prediction is the roofline lower bound.
    p = predict(QWEN7B, work, parallel, H100)
    for stage in p.stages:
        assert stage.time_s == stage.brent_lower_s, stage.name
        assert stage.time_s >= max(stage.compute_time_s, stage.memory_time_s, stage.comm_time_s)
        assert stage.brent_upper_s is None or stage.flops == stage.bytes == 0, stage.name
    assert p.brent_upper_s is None and p.brent_lower_s == p.step_time_s
    # With a latency (a row that overlaps dispatch, like a GPU) the bounds bracket the prediction.
    latent = predict(QWEN7B, work, parallel, dataclasses.replace(get_hardware(H100), op_latency_s=1e-4))
    for stage in latent.stages:
        assert stage.brent_lower_s == stage.time_s <= stage.brent_upper_s, stage.name
    assert 0 < latent.brent_lower_s <= latent.step_time_s <= latent.brent_upper_s
    assert latent.to_dict()["brent"] == {"lower_s": latent.brent_lower_s, "upper_s": latent.brent_upper_s}


def test_decode_tail_raises_time() -> None:
    fixed = predict(QWEN7B, dataclasses.replace(WORK, response_len=400), ParallelShape(gpus=8), H100)
    tail = predict(
        QWEN7B,
        dataclasses.replace(WORK, response_len=1024, fixed_length=False, mean_response_len=400.0),
        ParallelShape(gpus=8),
        H100,
    )
    assert tail.stage("generation_decode").flops == pytest.approx(fixed.stage("generation_decode").flops)
    assert tail.stage("generation_decode").time_s > 2 * fixed.stage("generation_decode").time_s


def test_memory_falls_with_sharding() -> None:
    def mem(**kw: object) -> float:
        return predict(QWEN7B, WORK, ParallelShape(gpus=8, **kw), H100).memory.trainer_gb

    def states(gpus: int) -> float:
        parts = predict(QWEN7B, WORK, ParallelShape(gpus=gpus), H100).memory.breakdown_gb
        return parts["params"] + parts["grads"] + parts["optimizer"]

    assert mem(sharding="full") < mem(sharding="optimizer") < mem(sharding="none")
    assert states(16) == pytest.approx(states(8) / 2)
    # 16 bytes per parameter over 8 ranks (ZeRO accounting)
    assert states(8) == pytest.approx(16 * 7.6156e9 / 8 / 1e9, rel=1e-3)


def test_checkpointing_cuts_activations_adds_a_forward() -> None:
    plain = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)
    ckpt = predict(QWEN7B, dataclasses.replace(WORK, gradient_checkpointing=True), ParallelShape(gpus=8), H100)
    assert ckpt.memory.breakdown_gb["activations"] < plain.memory.breakdown_gb["activations"] / 3  # logits stay
    assert ckpt.stage("actor_update").flops == pytest.approx(plain.stage("actor_update").flops * 4 / 3)
    assert ckpt.stage("actor_update").model_flops == plain.stage("actor_update").model_flops


def test_ppo_adds_critic_stages_grpo_has_none() -> None:
    grpo = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)
    ppo = predict(QWEN7B, dataclasses.replace(WORK, algorithm="ppo"), ParallelShape(gpus=8), H100)
    for name in ("critic_values", "critic_update"):
        assert grpo.stage(name).flops == 0 and ppo.stage(name).flops > 0
    assert "critic_states" in ppo.memory.breakdown_gb


def test_to_dict_keys() -> None:
    d = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100).to_dict()
    assert {"stages", "step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_gb", "cost_per_mtok_usd", "brent"} <= set(d)
    names = [s["name"] for s in d["stages"]]
    assert names == [
        "generation_prefill",
        "generation_decode",
        "reward",
        "ref_logprob",
        "old_logprob",
        "critic_values",
        "advantage",
        "actor_update",
        "critic_update",
        "weight_sync",
    ]
    for stage in d["stages"]:
        assert {"name", "flops", "bytes", "comm_bytes", "time_s"} <= set(stage)
        assert isinstance(stage["comm_bytes"], dict)


def test_throughput_mfu_energy_cost_definitions() -> None:
    p = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100, kwh_usd=0.1)
    tokens = 256 * (512 + 1024)
    assert p.tokens_per_s == pytest.approx(tokens / p.step_time_s)
    assert p.mfu == pytest.approx(p.model_flops / (8 * 989e12 * p.step_time_s))
    assert 0 < p.mfu < 1
    assert p.energy_j == pytest.approx(700 * 8 * p.step_time_s)
    dollars = 8 * p.step_time_s / 3600 * (98.32 / 8) + 0.1 * p.energy_j / 3.6e6
    assert p.cost_per_mtok_usd == pytest.approx(dollars / (tokens / 1e6))


def test_unknown_price_and_link_give_none() -> None:
    assert predict(QWEN7B, WORK, ParallelShape(gpus=8), "H200").cost_per_mtok_usd is None  # no default price
    assert predict(QWEN7B, WORK, ParallelShape(gpus=8), "H200", gpu_hour_usd=3.0).cost_per_mtok_usd > 0
    # 16 L40S span two nodes; the L40S row states no inter-node bandwidth -> n/a, not a guess
    p = predict(QWEN7B, WORK, ParallelShape(gpus=16), "L40S")
    assert p.step_time_s is None and p.tokens_per_s is None and p.mfu is None and p.energy_j is None
    assert any("n/a" in note for note in p.notes)


def test_achievable_fraction_scales_time() -> None:
    full = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100)
    half = predict(QWEN7B, WORK, ParallelShape(gpus=8), H100, achievable=0.5)
    assert half.step_time_s == pytest.approx(2 * full.step_time_s)
    with pytest.raises(ValueError, match="achievable"):
        predict(QWEN7B, WORK, ParallelShape(gpus=8), H100, achievable=1.5)


def test_accepts_objects_and_cpu_row() -> None:
    from rlbench.harness.perfmodel import cpu_hardware, get_arch

    p = predict(
        get_arch("Qwen2.5-0.5B-Instruct"),
        dataclasses.replace(WORK, prompts_per_step=1, group_size=2),
        ParallelShape(gpus=1),
        cpu_hardware(peak_flops=1e12, mem_bw=5e10),
    )
    assert p.step_time_s > 0 and p.cost_per_mtok_usd is None and p.energy_j is None
    assert get_hardware(H100).bf16_flops == 989e12


def test_fp32_doubles_the_bytes_a_decode_moves():
    import dataclasses

    from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict

    bf16 = WorkloadShape(prompts_per_step=8, group_size=4, prompt_len=128, response_len=256)
    fp32 = dataclasses.replace(bf16, dtype_bytes=4)
    decode = [
        predict("Qwen2.5-0.5B-Instruct", s, ParallelShape(gpus=1), "H100-SXM").stage("generation_decode")
        for s in (bf16, fp32)
    ]
    assert decode[1].bytes == pytest.approx(2 * decode[0].bytes)
    assert decode[1].flops == decode[0].flops
    with pytest.raises(ValueError, match="dtype_bytes"):
        dataclasses.replace(bf16, dtype_bytes=3)
