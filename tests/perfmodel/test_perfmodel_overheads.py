"""Bound vs estimate: the GPU overhead terms (perfmodel/overheads.py) and the neutral launch shape."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from rlbench.harness.perfmodel import (
    ParallelShape,
    WorkloadShape,
    cpu_hardware,
    get_arch,
    get_hardware,
    overheads,
    predict,
)
from rlbench.harness.perfmodel.shapes import NEUTRAL_MICRO_BATCH_TOKENS
from rlbench.harness.predict.job_shape import neutral_fields
from rlbench.harness.predict.run_prediction import measured_vs_predicted
from rlbench.harness.spec.parallel import Parallelism

GRPO_8B = WorkloadShape(prompts_per_step=64, group_size=8, prompt_len=512, response_len=1024)


def neutral(shape: WorkloadShape) -> WorkloadShape:
    return dataclasses.replace(shape, **neutral_fields(shape, Parallelism()))


def test_the_neutral_shape_packs_tokens_and_never_one_sequence_per_micro_batch():
    shape = neutral(GRPO_8B)
    assert shape.micro_batch_tokens == NEUTRAL_MICRO_BATCH_TOKENS == 16384
    assert shape.micro_batches(64) == 6  # 64 x 1,536 tokens in 16,384-token micro-batches, not 64 of them
    long = WorkloadShape(prompts_per_step=8, prompt_len=1024, response_len=20000)
    assert neutral(long).micro_batch_tokens == 21024  # a budget never below one whole sequence


def test_an_8b_grpo_step_is_faster_on_16_h100_than_on_8_with_the_packed_shape():
    shape = neutral(GRPO_8B)
    eight, sixteen = (predict("Llama-3.1-8B", shape, ParallelShape(gpus=g), "H100-SXM") for g in (8, 16))
    assert sixteen.step_time_bound_s < eight.step_time_bound_s
    assert sixteen.step_time_estimate_s < eight.step_time_estimate_s
    # One sequence per micro-batch re-gathers the model for every sequence: the packed shape is faster.
    unpacked = predict("Llama-3.1-8B", GRPO_8B, ParallelShape(gpus=16), "H100-SXM")
    assert sixteen.step_time_bound_s < unpacked.step_time_bound_s


def test_the_estimate_is_never_below_the_bound_stage_by_stage():
    p = predict("Qwen2.5-7B-Instruct", neutral(GRPO_8B), ParallelShape(gpus=8), "H100-SXM")
    for bound, estimate in zip(p.stages, p.estimate_stages):
        assert bound.name == estimate.name and estimate.time_s >= bound.time_s
    assert p.step_time_estimate_s > p.step_time_bound_s
    assert p.mfu_estimate < p.mfu_bound <= 1.0
    assert p.estimate_terms["achievable_fraction"] == overheads.ACHIEVABLE_FRACTION
    assert p.estimate_terms["trainer_mfu"] == overheads.TRAINER_MFU
    # A compute-bound update runs at the trainer's MFU, not a lone GEMM's rate.
    actor_bound, actor_estimate = p.stage("actor_update"), {s.name: s for s in p.estimate_stages}["actor_update"]
    assert actor_estimate.compute_time_s == pytest.approx(actor_bound.compute_time_s / overheads.TRAINER_MFU)


def test_a_small_models_decode_is_held_at_the_engines_per_step_floor():
    shape = WorkloadShape(prompts_per_step=8, group_size=4, prompt_len=100, response_len=256)
    none = overheads.NO_FITTED_TERMS  # the floor alone; the fitted per-token cost is tested below
    graphs = predict("Qwen2.5-0.5B-Instruct", shape, ParallelShape(gpus=8), "H100-SXM", fitted=none)
    eager = predict(
        "Qwen2.5-0.5B-Instruct",
        dataclasses.replace(shape, engine_mode="eager"),
        ParallelShape(gpus=8),
        "H100-SXM",
        fitted=none,
    )
    bound = graphs.stage("generation_decode").time_s
    decode = {s.name: s for s in graphs.estimate_stages}["generation_decode"]
    # The roofline of a 0.5B decode step is far under a millisecond; the engine steps no faster than its floor.
    assert bound < 256 * 1e-3
    assert decode.time_s == pytest.approx(256 * overheads.ENGINE_STEP_FLOOR_S["cuda_graphs"])
    assert decode.bound == "engine"
    eager_decode = {s.name: s for s in eager.estimate_stages}["generation_decode"]
    assert eager_decode.time_s == pytest.approx(256 * overheads.ENGINE_STEP_FLOOR_S["eager"])
    assert eager_decode.time_s > decode.time_s
    assert graphs.stage("generation_decode").time_s == eager.stage("generation_decode").time_s  # the bound ignores it


def test_trainer_passes_pay_kernel_launches_in_the_estimate_only():
    row = overheads.estimate_hardware(get_hardware("H100-SXM"))
    assert row.op_latency_s == pytest.approx(overheads.KERNELS_PER_LAYER_FORWARD * overheads.KERNEL_LAUNCH_S)
    assert get_hardware("H100-SXM").op_latency_s is None  # the datasheet row itself is untouched
    # Tiny micro-batches of a small model: the launch chain, not the arithmetic, sets the estimate.
    tiny = WorkloadShape(prompts_per_step=64, group_size=1, prompt_len=16, response_len=16)
    p = predict("Qwen2.5-0.5B-Instruct", tiny, ParallelShape(gpus=1), "H100-SXM")
    actor = {s.name: s for s in p.estimate_stages}["actor_update"]
    assert actor.bound == "latency" and actor.time_s > 10 * p.stage("actor_update").time_s


def test_sequences_in_flight_are_capped_by_the_engines_memory_and_more_steps_follow():
    arch, hw = get_arch("Qwen2.5-7B-Instruct"), get_hardware("H100-SXM")
    shape = WorkloadShape(prompts_per_step=128, group_size=16, prompt_len=1024, response_len=8192)
    layout = ParallelShape(gpus=8)
    assert overheads.in_flight(arch, shape, layout, hw) == 256  # every sequence of the replica at once
    assert overheads.engine_steps(arch, shape, layout, hw) == 8192
    tight = dataclasses.replace(shape, engine_memory_fraction=0.5, engine_max_seqs=256)
    held = overheads.in_flight(arch, tight, layout, hw)
    assert 1 <= held < 256
    assert overheads.engine_steps(arch, tight, layout, hw) == -(-256 * 8192 // held)
    roomy, cramped = (predict(arch, s, layout, hw) for s in (shape, tight))
    assert cramped.step_time_estimate_s > roomy.step_time_estimate_s
    assert cramped.step_time_bound_s == roomy.step_time_bound_s


def test_a_measured_cpu_row_is_its_own_estimate():
    cpu = cpu_hardware(1e11, 1e10, op_latency_s=3e-4)
    p = predict(
        "Qwen2.5-0.5B-Instruct",
        WorkloadShape(prompts_per_step=2, prompt_len=8, response_len=8),
        ParallelShape(gpus=1),
        cpu,
    )
    assert p.step_time_estimate_s == p.step_time_s and p.estimate_terms["kind"] == "measured"
    assert p.step_time_bound_s <= p.step_time_s


def test_prediction_json_labels_bound_and_estimate_and_keeps_the_old_keys():
    data = predict("Llama-3.1-8B", neutral(GRPO_8B), ParallelShape(gpus=8), "H100-SXM").to_dict()
    for key in (
        "step_time_bound_s",
        "step_time_estimate_s",
        "mfu_bound",
        "mfu_estimate",
        "tokens_per_s_estimate",
        "group_times_estimate_s",
        "estimate_terms",
        "step_time_s",
        "mfu",
        "brent",
    ):
        assert key in data
    assert data["step_time_s"] == data["step_time_bound_s"] and data["mfu"] == pytest.approx(data["mfu_bound"])
    assert all({"time_s", "bound_s", "estimate_s"} <= set(s) for s in data["stages"])
    summary = {
        "step_time_s": {"median": 3 * data["step_time_estimate_s"]},
        "time_gen_s": {"median": 2 * data["group_times_estimate_s"]["generation"]},
    }
    compared = measured_vs_predicted(summary, {"available": True, **data})
    assert compared["step"]["measured_over_estimate"] == pytest.approx(3.0)
    assert compared["stages"]["gen"]["measured_over_estimate"] == pytest.approx(2.0)
    # A record from before the estimate still compares against its step time.
    old = {k: v for k, v in data.items() if k != "step_time_estimate_s"}
    assert "measured_over_estimate" not in measured_vs_predicted(summary, {"available": True, **old})["step"]


def test_every_overhead_constant_cites_a_source():
    for name in (
        "ACHIEVABLE_FRACTION",
        "TRAINER_MFU",
        "MOE_TRAINER_MFU",
        "KERNEL_LAUNCH_S",
        "KERNELS_PER_LAYER_FORWARD",
        "ENGINE_STEP_FLOOR_S",
    ):
        assert getattr(overheads, name) and overheads.SOURCES[name]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("engine_mode", "graphs"),
        ("engine_max_seqs", 0),
        ("engine_memory_fraction", 1.5),
        ("engine_memory_fraction", True),
    ],
)
def test_bad_engine_settings_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        WorkloadShape(prompts_per_step=1, prompt_len=1, response_len=1, **{field: value})


def test_the_gpu_measurement_protocol_refuses_without_cuda(capsys):
    import importlib.util
    from pathlib import Path

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the protocol would run")
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "measure_gpu_overheads.py"
    spec = importlib.util.spec_from_file_location("measure_gpu_overheads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_the_trainer_unit_protocol_runs_an_fsdp_trainer_and_gives_a_per_unit_time():
    """The protocol behind FITTED.trainer_unit_s runs here on the CPU (gloo, one process): FSDP-wrapped
    forward and checkpointed forward + backward at 2 and 8 layers, the per-layer slope per unit."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "measure_gpu_overheads.py"
    spec = importlib.util.spec_from_file_location("measure_gpu_overheads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    unit = module.trainer_unit(torch, device="cpu", repeats=2)
    fwd_2, fwd_8 = unit["forward_2_8_layers_s"]
    train_2, train_8 = unit["train_2_8_layers_s"]
    assert unit["forward_unit_s"] == pytest.approx((fwd_8 - fwd_2) / 6)
    assert unit["train_unit_s"] == pytest.approx((train_8 - train_2) / 24)
    assert train_2 > fwd_2 > 0 and unit["micro_batch_tokens"] == 256
    assert not torch.distributed.is_initialized()  # the process group it started is gone


def test_the_fitted_terms_add_per_step_and_per_token_decode_cost_and_a_colocated_refit_floor():
    shape = WorkloadShape(
        prompts_per_step=64, group_size=32, prompt_len=130, response_len=4096, fixed_length=False, mean_response_len=800
    )
    terms = overheads.FittedTerms(
        decode_step_s={"cuda_graphs": 5e-3},
        decode_token_s={"cuda_graphs": 1e-4, "eager": 3e-4},
        refit_bytes_per_s=2e9,
        fitted_on=("a-run",),
    )
    for placement, rollout_gpus in (("colocated", 0), ("disaggregated", 8)):
        layout = ParallelShape(gpus=16, placement=placement, rollout_gpus=rollout_gpus)
        plain = predict("Llama-3.1-8B", shape, layout, "H100-SXM", fitted=overheads.NO_FITTED_TERMS)
        fitted = predict("Llama-3.1-8B", shape, layout, "H100-SXM", fitted=terms)
        before = {s.name: s.time_s for s in plain.estimate_stages}
        after = {s.name: s.time_s for s in fitted.estimate_stages}
        tokens = overheads.engine_tokens(shape, layout)  # the busiest engine's share x the mean response
        assert tokens == pytest.approx(2048 / layout.rollout_replicas * 800)
        steps = fitted.estimate_terms["decode_steps"]  # the depth: the cap, however many engines share the batch
        assert steps == 4096
        assert after["generation_decode"] == pytest.approx(before["generation_decode"] + steps * 5e-3 + tokens * 1e-4)
        weights = get_arch("Llama-3.1-8B").weight_bytes()
        if placement == "colocated":  # the engine takes its weights through the trainer's GPUs: the fitted rate
            assert after["weight_sync"] == pytest.approx(weights / 2e9)
        else:  # the links' bound stays: no disaggregated refit was published to fit on
            assert after["weight_sync"] == before["weight_sync"]
        assert plain.step_time_bound_s == fitted.step_time_bound_s  # the bound never takes a fitted term
        assert fitted.to_dict()["estimate_terms"]["fitted_on"] == ["a-run"]
    # An eager engine pays its own mode's per-token cost; a mode with no fitted run pays none.
    eager_shape = dataclasses.replace(shape, engine_mode="eager")
    layout = ParallelShape(gpus=16)
    plain, eager = (
        {s.name: s.time_s for s in predict("Llama-3.1-8B", eager_shape, layout, "H100-SXM", fitted=t).estimate_stages}
        for t in (overheads.NO_FITTED_TERMS, terms)
    )
    tokens = overheads.engine_tokens(eager_shape, layout)
    assert eager["generation_decode"] == pytest.approx(plain["generation_decode"] + tokens * 3e-4)
    graphs_only = dataclasses.replace(terms, decode_token_s={"cuda_graphs": 1e-4})  # and its per-step term
    unfitted = predict("Llama-3.1-8B", eager_shape, layout, "H100-SXM", fitted=graphs_only)
    assert {s.name: s.time_s for s in unfitted.estimate_stages}["generation_decode"] == pytest.approx(
        plain["generation_decode"]
    )
    assert unfitted.estimate_terms["decode_token_s"] == 0.0


def test_the_trainer_unit_term_raises_a_host_bound_trainer_pass_and_leaves_the_rest():
    """trainer_unit_s prices each layer unit of a trainer pass at max(it, the launch latency): a small model's
    many small micro-batches become host-bound at depth x trainer_unit_s; generation, the compute-bound passes
    of a large micro-batch and the bound do not move."""
    shape = WorkloadShape(prompts_per_step=256, group_size=2, prompt_len=100, response_len=200, micro_batch_size=4)
    layout = ParallelShape(gpus=8)
    terms = overheads.FittedTerms(trainer_unit_s=2e-3)
    plain = predict("Qwen2.5-0.5B-Instruct", shape, layout, "H100-SXM", fitted=overheads.NO_FITTED_TERMS)
    fitted = predict("Qwen2.5-0.5B-Instruct", shape, layout, "H100-SXM", fitted=terms)
    before = {s.name: s for s in plain.estimate_stages}
    after = {s.name: s for s in fitted.estimate_stages}
    for name in ("ref_logprob", "old_logprob", "actor_update"):
        assert after[name].bound == "latency"
        assert after[name].time_s == pytest.approx(after[name].depth * 2e-3)
        assert after[name].time_s > before[name].time_s
    # 64 sequences per GPU in micro-batches of 4: 16 forwards of 24 layers + 2 units each
    assert after["old_logprob"].depth == 16 * 26
    for name in ("generation_prefill", "generation_decode", "advantage", "weight_sync"):
        assert after[name].time_s == before[name].time_s
    assert fitted.step_time_bound_s == plain.step_time_bound_s
    assert fitted.estimate_terms["trainer_op_latency_s"] == 2e-3
    # a term below the launch latency changes nothing: the unit never costs less than its launches
    tiny = overheads.FittedTerms(trainer_unit_s=1e-9)
    same = predict("Qwen2.5-0.5B-Instruct", shape, layout, "H100-SXM", fitted=tiny)
    assert same.step_time_estimate_s == plain.step_time_estimate_s
    # a big micro-batch of a big model is compute-bound: the term leaves it
    packed = dataclasses.replace(GRPO_8B, micro_batch_tokens=16384)
    big_plain, big = (
        predict("Llama-3.1-8B", packed, layout, "H100-SXM", fitted=t) for t in (overheads.NO_FITTED_TERMS, terms)
    )
    assert {s.name: s.time_s for s in big.estimate_stages}["actor_update"] == pytest.approx(
        {s.name: s.time_s for s in big_plain.estimate_stages}["actor_update"]
    )


def test_update_offload_swaps_states_around_the_updates_alone():
    """update_offload (OpenRLHF's colocated DeepSpeed sleep) swaps the fp32 shard and Adam moments over the host
    link around each update, serially; the forwards keep their parameters on the device. The copies are transfers
    the hardware must make, so the bound holds them too."""
    shape = dataclasses.replace(GRPO_8B, micro_batch_tokens=16384, algorithm="ppo")
    layout = ParallelShape(gpus=8)
    plain, swapped, everywhere = (
        predict("Llama-3.1-8B", dataclasses.replace(shape, **fields), layout, "H100-SXM")
        for fields in ({}, {"update_offload": True}, {"offload": True})
    )
    before, after, full = ({s.name: s for s in p.estimate_stages} for p in (plain, swapped, everywhere))
    shard = get_arch("Llama-3.1-8B").param_count().total / 8
    link = get_hardware("H100-SXM").host_link_bytes_per_s
    for name in ("actor_update", "critic_update"):
        assert "swapped in and out of host memory" in after[name].note
        assert after[name].time_s > before[name].time_s
    for name in ("old_logprob", "critic_values", "ref_logprob"):
        assert after[name].time_s == before[name].time_s
        assert "swapped" not in after[name].note
    assert "swapped" in full["old_logprob"].note  # offload swaps around every stage of the model
    assert f"({2 * shard * 12 / 1e9:.2f} GB/GPU)" in after["actor_update"].note and link
    assert swapped.step_time_bound_s > plain.step_time_bound_s


def test_k_step_async_decodes_k_batches_at_once_so_a_batch_pays_a_kth_of_the_longest_response():
    """With k batches in flight on its own pool, the engine's straggler tail of one batch overlaps the next
    batches: the bound's decode steps per RL step are longest / k; one-step-off and colocated keep one batch."""
    shape = WorkloadShape(
        prompts_per_step=64,
        group_size=32,
        prompt_len=110,
        response_len=4096,
        fixed_length=False,
        mean_response_len=3200,
    )

    def decode(async_mode: str, staleness: int = 1, placement: str = "disaggregated"):
        layout = ParallelShape(
            gpus=64,
            placement=placement,
            rollout_gpus=32 if placement == "disaggregated" else 0,
            async_mode=async_mode,
            async_staleness=staleness,
        )
        p = predict("Qwen3-30B-A3B", shape, layout, "H100-SXM", fitted=overheads.NO_FITTED_TERMS)
        return layout, p.stage("generation_decode"), p.to_dict()["estimate_terms"]["decode_steps"]

    one, one_stage, one_steps = decode("one-step")
    eight, eight_stage, eight_steps = decode("k-step", 8)
    assert one.batches_in_flight == 1 and eight.batches_in_flight == 8
    assert decode("k-step", 8, "colocated")[0].batches_in_flight == 1  # a shared pool holds one batch
    assert "8 batches in flight" in eight_stage.note
    assert eight_stage.time_s < one_stage.time_s / 3  # weight reads per RL step shrink ~k-fold
    assert one_steps >= 4096 and eight_steps >= 4096 / 8 and eight_steps < one_steps


def test_an_moe_trainer_runs_at_the_moe_recipes_mfu_not_the_dense_one():
    shape = neutral(GRPO_8B)
    moe = predict("Qwen3-30B-A3B", shape, ParallelShape(gpus=8, ep=8, sharding="optimizer"), "H100-SXM")
    dense = predict("Qwen2.5-7B-Instruct", shape, ParallelShape(gpus=8), "H100-SXM")
    assert overheads.MOE_TRAINER_MFU == pytest.approx(234.1 / 989)
    assert overheads.MOE_TRAINER_MFU < overheads.TRAINER_MFU
    assert moe.estimate_terms["trainer_mfu"] == overheads.MOE_TRAINER_MFU
    assert dense.estimate_terms["trainer_mfu"] == overheads.TRAINER_MFU
    bound, estimate = moe.stage("actor_update"), {s.name: s for s in moe.estimate_stages}["actor_update"]
    assert estimate.compute_time_s == pytest.approx(bound.compute_time_s / overheads.MOE_TRAINER_MFU)
