"""`rlbench predict --lengths prior`: the published response lengths declared for a dataset and model, checked
against the logs they cite, priced like any distribution, and refused in one line where none is declared."""

from __future__ import annotations

import json

import pytest

from rlbench.harness.perfmodel.lengths import ResponseLengths
from rlbench.workloads.length_priors import PRIORS, length_prior
from tests.conftest import run_cli

QWEN_05B = "Qwen/Qwen2.5-0.5B-Instruct"


def _unclipped(prior) -> ResponseLengths:
    """The prior's log-normal under a cap far past its tail (a cap below the mean is refused by the model)."""
    return ResponseLengths(mean=prior.mean, tail=prior.tail, tail_quantile=prior.tail_quantile, cap=1 << 16)


def _clipped_mean(lengths: ResponseLengths, cap: int) -> float:
    """E[min(L, cap)] = integral over [0, cap] of 1 - F(t) dt: what a framework logs as the mean length."""
    points = 4096
    step = cap / points
    return sum((1 - lengths.cdf((i + 0.5) * step)) * step for i in range(points))


@pytest.mark.parametrize(
    ("cap", "logged_low", "logged_high"),
    # verl's baseline logs (this workload's prompt, Qwen2.5-0.5B-Instruct, temperature 1), steps 0-10
    [(512, 296.6, 313.8), (256, 234.9, 236.8)],
)
def test_the_gsm8k_prior_gives_back_the_mean_verl_logged_under_each_cap(cap, logged_low, logged_high):
    clipped = _clipped_mean(_unclipped(length_prior("gsm8k", QWEN_05B)), cap)
    assert logged_low * 0.9 < clipped < logged_high * 1.1, clipped


def test_the_gsm8k_prior_keeps_the_truncation_share_it_was_fitted_to():
    lengths = _unclipped(length_prior("gsm8k", QWEN_05B))
    assert 1 - lengths.cdf(256) == pytest.approx(0.57, abs=0.02)  # trl #6263: ~57% past 256 tokens


def test_every_prior_cites_its_source_and_no_pair_is_declared_twice():
    assert all(p.source and p.tail > p.mean > 0 and p.tail_quantile in (0.9, 0.99) for p in PRIORS)
    pairs = [(p.dataset, m) for p in PRIORS for m in p.models]
    assert len(pairs) == len(set(pairs))
    assert length_prior("math", QWEN_05B) is None


def test_predict_prices_the_prior_and_names_its_source():
    args = ("predict", "--model-config", QWEN_05B, "--workload", "gsm8k-grpo", "--hardware", "H100-SXM")
    capped = json.loads(run_cli(*args, "--gpus", "8", "--json").stdout)
    result = run_cli(*args, "--gpus", "8", "--lengths", "prior", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    notes = " ".join(data["notes"])
    assert "declared prior of gsm8k with Qwen/Qwen2.5-0.5B-Instruct: mean 295, p90 449" in notes
    assert "huggingface/trl issue #6263" in notes
    # the batch's longest response (under 1,024) is the depth, so the step is shorter than at the cap
    assert data["step_time_estimate_s"] < capped["step_time_estimate_s"]


def test_a_model_without_a_prior_is_refused_in_one_line():
    result = run_cli(
        "predict", "--model-config", "Qwen/Qwen2.5-7B-Instruct", "--workload", "math-grpo", "--hardware",
        "H100-SXM", "--gpus", "8", "--lengths", "prior",
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: --lengths prior: no declared response-length prior for math with Qwen/Qwen2.5-7B-Instruct; "
        "give --lengths mean=T,p90=T or measure one with --lengths-from RUN"
    )


def test_partial_rollout_prices_the_mean_not_the_tail_and_every_framework_refuses_it():
    base = ("predict", "--model-config", QWEN_05B, "--workload", "gsm8k-grpo", "--hardware", "H100-SXM", "--gpus")
    split = ("16", "--lengths", "mean=300,p99=1000", "--parallel", "placement=disaggregated", "--parallel")
    waits = json.loads(run_cli(*base, *split, "async=one-step", "--json").stdout)
    refills = run_cli(*base, *split, "async=one-step", "--parallel", "partial_rollout=on", "--json")
    assert refills.returncode == 0, refills.stderr
    assert json.loads(refills.stdout)["step_time_estimate_s"] < waits["step_time_estimate_s"]
    alone = run_cli(*base, "8", "--parallel", "partial_rollout=on")
    assert alone.returncode == 2 and "needs rollout GPUs of their own and asynchrony" in alone.stderr
    for framework, reason in [
        ("verl", "fully_async_policy"),
        ("openrlhf", "--train.partial_rollout_enable only lets a weight sync pause"),
        ("trl", "asynchronous GRPO is experimental"),  # partial_rollout needs async,
    ]:
        result = run_cli(*base, *split, "async=one-step", "--parallel", "partial_rollout=on", "--framework", framework)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert reason in result.stderr
