"""rlbench's own MFU and throughput: one definition for every framework, from the workload's canonical FLOPs,
the hardware's dense peak and the common wall step time."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, get_hardware, predict
from rlbench.harness.predict.run_prediction import predict_run
from rlbench.harness.run.derive import canonical_work, derive_step_metrics, model_flops_utilisation, needs_old_logprob
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.catalog import load_workload

WORK = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)


def _prediction(gpus: int = 8) -> dict:
    p = predict("Qwen2.5-7B-Instruct", WORK, ParallelShape(gpus=gpus), "H100-SXM").to_dict()
    canonical = {"available": True, "model_flops": p["model_flops"], "tokens_per_step": p["tokens_per_step"]}
    return {"available": True, **p, "canonical": canonical}


def test_mfu_is_canonical_flops_over_devices_peak_and_wall_step_time():
    prediction = _prediction()
    assert prediction["peak_flops_per_device"] == get_hardware("H100-SXM").bf16_flops == 989e12
    # A step of exactly the predicted tokens taking 100 s; a second with half the tokens in the same time. The
    # framework's own timer (step_time_s) is not what MFU divides by when the common wall time is there.
    steps = pd.DataFrame(
        {
            "total_tokens": [WORK.tokens_per_step, WORK.tokens_per_step / 2],
            "wall_step_time_s": [100.0, 100.0],
            "step_time_s": [80.0, 50.0],
        }
    )
    mfu = model_flops_utilisation(steps, prediction)
    expected = prediction["model_flops"] / (8 * 989e12 * 100.0)
    assert mfu.tolist() == pytest.approx([expected, expected / 2])
    # Independent of the model's own count: a 7B step is at least 2·N FLOPs per generated-or-prompt token
    # (forward) and 6·N per trained token, so the MFU cannot sit below that floor.
    n = 6.5e9
    assert mfu[0] > (2 + 6) * n * WORK.tokens_per_step / (8 * 989e12 * 100.0)
    assert 0 < mfu[0] < 1


def test_the_measured_mfu_equals_the_predicted_one_at_the_predicted_step_time():
    prediction = _prediction(gpus=16)
    steps = pd.DataFrame({"total_tokens": [WORK.tokens_per_step], "step_time_s": [prediction["step_time_s"]]})
    assert model_flops_utilisation(steps, prediction)[0] == pytest.approx(prediction["mfu"])


@pytest.mark.parametrize(
    "prediction",
    [
        {"available": False, "reason": "unknown GPU"},
        {"available": True, "model_flops": 1e12, "tokens_per_step": 10, "gpus": 1},
        {  # a record from before canonical FLOPs: no MFU rather than one counting the framework's own passes
            "available": True,
            "model_flops": 1e12,
            "tokens_per_step": 10,
            "gpus": 1,
            "peak_flops_per_device": 1e12,
        },
    ],
)
def test_no_prediction_no_peak_or_no_canonical_count_gives_nan_not_a_guess(prediction):
    steps = pd.DataFrame({"total_tokens": [10], "step_time_s": [1.0]})
    assert math.isnan(model_flops_utilisation(steps, prediction)[0])


def test_throughput_divides_by_the_wall_step_time_and_says_when_it_cannot():
    steps = pd.DataFrame(
        {
            "prompt_tokens": [30, 30],
            "response_tokens": [70, 70],
            "step_time_s": [1.0, 1.0],
            "wall_step_time_s": [None, 2.0],
        }
    )
    derived, note = derive_step_metrics(steps, gpu_count=0)
    assert note is None and math.isnan(derived["tokens_per_s"][0]) and derived["tokens_per_s"][1] == 50.0
    derived, note = derive_step_metrics(steps.drop(columns="wall_step_time_s"), gpu_count=0)
    assert derived["tokens_per_s"].tolist() == [100.0, 100.0] and "own step timer" in note


def test_canonical_work_is_the_same_for_every_framework_and_counts_only_the_algorithms_passes():
    """The tiny GRPO workload updates once per rollout batch: no old-log-prob pass in the canonical count, so a
    framework that runs one (verl) does more work than the numerator credits, and padding never counts."""
    workload = load_workload("gsm8k-grpo-tiny")
    assert workload.updates_per_step == 1 and not needs_old_logprob(workload)
    args = (workload, Parallelism(), "Qwen2.5-0.5B-Instruct", {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    canonical = canonical_work(*args, prompt_len=100.0)
    assert canonical["available"] and canonical["old_logprob_pass"] is False and canonical["prompt_len"] == 100
    with_pass = predict_run(*args, prompt_len=100.0, recompute_old_logprob=True)  # what verl runs
    padded = predict_run(*args, prompt_len=100.0, recompute_old_logprob=False, padded_prompt_len=140.0)  # TRL
    assert with_pass["model_flops"] > canonical["model_flops"] and padded["model_flops"] > canonical["model_flops"]
    assert canonical["tokens_per_step"] == with_pass["tokens_per_step"] == padded["tokens_per_step"]
