"""rlbench's own MFU: one definition for every framework, from the model's FLOPs and the hardware's dense peak."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, get_hardware, predict
from rlbench.harness.run.derive import model_flops_utilisation

WORK = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)


def _prediction(gpus: int = 8) -> dict:
    return {"available": True, **predict("Qwen2.5-7B-Instruct", WORK, ParallelShape(gpus=gpus), "H100-SXM").to_dict()}


def test_mfu_is_model_flops_over_devices_peak_and_measured_time():
    prediction = _prediction()
    assert prediction["peak_flops_per_device"] == get_hardware("H100-SXM").bf16_flops == 989e12
    # A step of exactly the predicted tokens taking 100 s; a second with half the tokens in the same time.
    steps = pd.DataFrame(
        {"total_tokens": [WORK.tokens_per_step, WORK.tokens_per_step / 2], "step_time_s": [100.0, 100.0]}
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
    ],
)
def test_no_prediction_or_no_peak_gives_nan_not_a_guess(prediction):
    steps = pd.DataFrame({"total_tokens": [10], "step_time_s": [1.0]})
    assert math.isnan(model_flops_utilisation(steps, prediction)[0])
