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
        ("verl", "use --parallel async=fully with it"),
        ("openrlhf", "--train.partial_rollout_enable only lets a weight sync pause"),
        ("trl", "asynchronous GRPO is experimental"),  # partial_rollout needs async,
    ]:
        result = run_cli(*base, *split, "async=one-step", "--parallel", "partial_rollout=on", "--framework", framework)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert reason in result.stderr
    # verl's fully-async trainer is where its partial rollout lives: planned like one-step with the refill.
    fully = run_cli(*base, *split, "async=fully", "--parallel", "partial_rollout=on", "--framework", "verl", "--json")
    assert fully.returncode == 0, fully.stderr
    assert json.loads(fully.stdout)["step_time_estimate_s"] == json.loads(refills.stdout)["step_time_estimate_s"]


def test_without_lengths_a_sampled_workload_is_priced_at_its_prior_and_says_so():
    """gsm8k-grpo-target samples to the end of text: with no --lengths, predict prices the declared prior of its
    dataset and model (not the cap as if known), names it, and the sweep names the length crossover or says
    there is none across the plausible range."""
    args = ("predict", "--model-config", QWEN_05B, "--workload", "gsm8k-grpo-target", "--hardware", "H100-SXM")
    unstated = run_cli(*args, "--gpus", "8", "--json")
    assert unstated.returncode == 0, unstated.stderr
    prior = json.loads(run_cli(*args, "--gpus", "8", "--lengths", "prior", "--json").stdout)
    data = json.loads(unstated.stdout)
    assert data["step_time_estimate_s"] == pytest.approx(prior["step_time_estimate_s"])
    notes = " ".join(data["notes"])
    assert "the declared prior of gsm8k with Qwen/Qwen2.5-0.5B-Instruct (no --lengths given): mean 295" in notes
    swept = run_cli(
        *args, "--gpus", "8", "--sweep", "rollout_tp=1,2", "--sweep", "placement=colocated,disaggregated", "--json"
    )
    assert swept.returncode == 0, swept.stderr
    (line,) = [n for n in json.loads(swept.stdout)["notes"] if "crossover" in n]
    assert "no length crossover in that range" in line or "length crossover between mean" in line, line
    assert "74-" in line  # the scan starts at a quarter of the prior's mean


def test_without_lengths_or_a_prior_the_cap_is_said_to_be_the_most_work():
    result = run_cli(
        "predict", "--model-config", "Qwen/Qwen2.5-7B-Instruct", "--workload", "gsm8k-grpo-target", "--hardware",
        "H100-SXM", "--gpus", "8", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = " ".join(json.loads(result.stdout)["notes"])
    assert "no declared prior for gsm8k with Qwen/Qwen2.5-7B-Instruct: every response is priced at the cap" in notes
    fixed = run_cli(*(a if a != "gsm8k-grpo-target" else "gsm8k-grpo" for a in result.args[3:]))
    assert "priced at the cap" not in fixed.stdout  # generated to the cap: that is the work, nothing to say


def test_a_tail_workload_is_priced_at_the_distribution_it_declares():
    result = run_cli(
        "predict", "--workload", "gsm8k-grpo-tiny-tail", "--hardware", "H100-SXM", "--json", "--model-config", QWEN_05B
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = " ".join(json.loads(result.stdout)["notes"])
    assert "response lengths from the workload's declared distribution: mean 16, p99 72, cap 64 tokens" in notes


def test_the_crossover_is_named_between_the_two_means_it_falls_between():
    from rlbench.harness.predict.plan import _crossover

    lengths = ResponseLengths(mean=100.0, tail=200.0, tail_quantile=0.99, cap=1024)

    def ranking(priced):  # short answers favour more data parallelism, long ones a wider engine
        return {"ranked": [{"layout": {"dp": 8} if priced[1] < 150 else {"dp": 4, "rollout_tp": 2}}]}

    line = _crossover(ranking, lengths)
    assert line == (
        "length crossover between mean 100 and 200 tokens: dp=8 ranks first below it, dp=4 rollout_tp=2 above "
        "(scanned mean lengths 25-400 tokens)"
    )
    assert "no length crossover" in _crossover(lambda priced: {"ranked": [{"layout": {"dp": 8}}]}, lengths)
