"""A left-padded batch (TRL): the model computes on the padded prompt width, MFU on the real tokens."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, get_arch, get_hardware, predict

ARCH = get_arch("Qwen2.5-0.5B-Instruct")
HW = get_hardware("H100-SXM")
WORK = WorkloadShape(
    prompts_per_step=4,
    group_size=4,
    prompt_len=90,
    response_len=32,
    use_kl_reference=False,
    recompute_old_logprob=False,
    micro_batch_size=16,
    shared_prefill=False,
)


def test_pads_cost_flops_but_not_model_flops() -> None:
    bare = predict(ARCH, WORK, ParallelShape(gpus=1), HW)
    padded = predict(ARCH, dataclasses.replace(WORK, padded_prompt_len=120), ParallelShape(gpus=1), HW)
    prefill, padded_prefill = bare.stage("generation_prefill"), padded.stage("generation_prefill")
    assert padded_prefill.flops == pytest.approx(prefill.flops * 120 / 90, rel=0.02)  # per position, ~linear
    update, padded_update = bare.stage("actor_update"), padded.stage("actor_update")
    assert padded_update.flops > update.flops * 1.2  # 152 positions per sequence instead of 122
    assert padded_update.model_flops == pytest.approx(update.model_flops)  # MFU counts the real tokens
    assert padded.stage("generation_decode").bytes > bare.stage("generation_decode").bytes  # pads in the cache
    assert padded.tokens_per_s < bare.tokens_per_s  # same tokens, more time


def test_computed_lengths() -> None:
    assert WORK.computed_prompt_len == 90 and WORK.computed_seq_len == 122
    padded = dataclasses.replace(WORK, padded_prompt_len=120)
    assert padded.computed_prompt_len == 120 and padded.computed_seq_len == 152
    assert padded.mean_seq_len == 122  # throughput's tokens stay the real ones


def test_padding_narrower_than_the_mean_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"WorkloadShape\.padded_prompt_len"):
        dataclasses.replace(WORK, padded_prompt_len=80)


def test_run_prediction_takes_the_measured_width_and_ignores_nan(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    from rlbench.harness.predict.run_prediction import predict_run
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    args = (
        load_workload("gsm8k-grpo-tiny"),
        parse_parallel(()),
        "Qwen2.5-0.5B-Instruct",
        {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]},
    )
    bare = predict_run(*args, prompt_len=90, recompute_old_logprob=False, padded_prompt_len=math.nan)
    assert bare["inputs"]["padded_prompt_len"] is None
    padded = predict_run(*args, prompt_len=90, recompute_old_logprob=False, padded_prompt_len=119.6)
    assert padded["inputs"]["padded_prompt_len"] == 120
    assert padded["step_time_s"] > bare["step_time_s"]


def test_trl_rows_carry_the_padded_width() -> None:
    from rlbench.adapters.trl.metrics import normalize

    line = {
        "step": 1,
        "step_time_s": 1.0,
        "step_start_unix_s": 0.0,
        "step_end_unix_s": 1.0,
        "stages_s": {"gen": 0.4, "make_experience": 0.5},
        "tokens": {"prompt": 1500, "prompt_padded": 1920, "response": 512, "responses": 16},
    }
    row = normalize(line)
    assert row["padded_prompt_tokens"] == 1920 and row["prompt_tokens"] == 1500


def test_a_critic_that_pads_while_the_actor_packs_pays_the_padded_width_on_its_passes_alone() -> None:
    """verl lets the critic run without padding removal while the actor packs (critic.model.use_remove_padding)."""
    ppo = dataclasses.replace(
        WORK, algorithm="ppo", group_size=1, prompts_per_step=16, fixed_length=False, mean_response_len=16
    )
    packed = predict(ARCH, ppo, ParallelShape(gpus=1), HW)
    critic_pads = predict(ARCH, dataclasses.replace(ppo, critic_padded_prompt_len=120), ParallelShape(gpus=1), HW)
    for stage in ("critic_values", "critic_update"):  # 120 + 32 positions per sequence instead of 90 + 16
        assert critic_pads.stage(stage).flops > packed.stage(stage).flops * 1.3
        assert critic_pads.stage(stage).model_flops == pytest.approx(packed.stage(stage).model_flops)
    for stage in ("generation_prefill", "generation_decode", "actor_update"):  # the actor's passes keep packing
        assert critic_pads.stage(stage).flops == packed.stage(stage).flops
    with pytest.raises(ValueError, match=r"WorkloadShape\.critic_padded_prompt_len"):
        dataclasses.replace(ppo, critic_padded_prompt_len=80)


def test_a_trainer_that_pads_while_the_engine_pages_pays_the_padded_width_on_training_passes_alone() -> None:
    """verl without padding removal: its dataset left-pads prompts, vLLM pages each sequence without the pads."""
    ppo = dataclasses.replace(
        WORK, algorithm="ppo", group_size=1, prompts_per_step=16, fixed_length=False, mean_response_len=16
    )
    packed = predict(ARCH, ppo, ParallelShape(gpus=1), HW)
    pads = predict(ARCH, dataclasses.replace(ppo, trainer_padded_prompt_len=120), ParallelShape(gpus=1), HW)
    for stage in ("actor_update", "critic_values", "critic_update"):  # 120 + 32 positions instead of 90 + 16
        assert pads.stage(stage).flops > packed.stage(stage).flops * 1.3
        assert pads.stage(stage).model_flops == pytest.approx(packed.stage(stage).model_flops)
    for stage in ("generation_prefill", "generation_decode"):  # the engine computes no pads
        assert pads.stage(stage).flops == packed.stage(stage).flops
        assert pads.stage(stage).bytes == packed.stage(stage).bytes
    with pytest.raises(ValueError, match=r"WorkloadShape\.trainer_padded_prompt_len"):
        dataclasses.replace(ppo, trainer_padded_prompt_len=80)


def test_openrlhf_logs_the_width_its_policy_computed_and_the_prediction_takes_it(tmp_path, monkeypatch) -> None:
    """OpenRLHF without packing right-pads each batch to its longest sequence: rlbench's hook logs each policy
    forward's rows x width; the step's mean width prices the training passes, never generation."""
    import json

    from rlbench.adapters.openrlhf.metrics import read_forward_widths, read_span_log
    from rlbench.harness.predict.run_prediction import predict_run
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    log = tmp_path / "spans.jsonl"
    lines = [
        {"step": 1, "forward": {"rows": 16, "width": 150}},
        {"step": 1, "forward": {"rows": 8, "width": 120}},  # (16 x 150 + 8 x 120) / 24 = 140
        {"step": 1, "stage": "gen", "start_unix_s": 1.0, "end_unix_s": 2.0},
        {"step": 2, "forward": {"rows": 0, "width": 150}},  # nothing computed: no width
        {"step": 2, "forward": {"rows": "16", "width": 150}},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"step": 3, "forward": {"rows": 1')
    assert read_forward_widths(log) == {1: pytest.approx(140.0)}
    assert read_forward_widths(tmp_path / "none.jsonl") == {}
    assert read_span_log(log)["stage"].tolist() == ["gen"]  # the span reader skips the shapes

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    workload = load_workload("gsm8k-grpo-tiny")
    args = (workload, parse_parallel(()), "Qwen2.5-0.5B-Instruct", {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    bare = predict_run(*args, prompt_len=90, recompute_old_logprob=True, trainer_padded_width=math.nan)
    assert bare["inputs"]["trainer_padded_prompt_len"] is None
    width = 90 + workload.max_response_length + 30.4  # 30 pad positions per row, rounded
    pads = predict_run(*args, prompt_len=90, recompute_old_logprob=True, trainer_padded_width=width)
    assert pads["inputs"]["trainer_padded_prompt_len"] == 120 and pads["inputs"]["padded_prompt_len"] is None
    times = {name: {s["name"]: s["time_s"] for s in p["stages"]} for name, p in (("bare", bare), ("pads", pads))}
    for stage in ("old_logprob", "actor_update"):
        assert times["pads"][stage] > times["bare"][stage]
    for stage in ("generation_prefill", "generation_decode"):
        assert times["pads"][stage] == times["bare"][stage]


def test_a_cpu_lane_run_with_a_rollout_pool_of_its_own_is_priced_as_two_devices(tmp_path, monkeypatch) -> None:
    """On a CPU lane the trainer and the rollout engine are separate processes on one worker thread each: a
    colocated run's stages take turns on one device; a run with a rollout pool of its own has two, side by side
    where the machine has two cores, and with one-step-off its generation overlaps the rest (no prediction on
    a one-core machine, where they would share the core)."""
    from rlbench.harness.perfmodel import find_hardware
    from rlbench.harness.predict import run_prediction
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    monkeypatch.setattr(run_prediction, "hardware_for", lambda *a, **k: find_hardware("H100-SXM"))
    workload = load_workload("gsm8k-grpo-tiny-tail")

    def priced(pairs: tuple[str, ...], cores: int = 2) -> dict:
        environment = {"gpus": [], "cpu_count": cores}
        return run_prediction.predict_run(
            workload, parse_parallel(pairs), "Qwen2.5-0.5B-Instruct", environment, prompt_len=90,
            recompute_old_logprob=False, generated=(15.7, 64),
        )  # fmt: skip

    colocated = priced(())
    one_step = priced(("placement=disaggregated", "async=one-step"))
    assert (colocated["gpus"], one_step["gpus"]) == (1, 2) and one_step["async"]["depth"] == 1
    assert one_step["step_time_estimate_s"] < colocated["step_time_estimate_s"]
    alone = priced(("placement=disaggregated", "async=one-step"), cores=1)
    assert not alone["available"] and "one-core CPU" in alone["reason"]
