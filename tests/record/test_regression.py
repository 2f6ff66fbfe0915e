"""Regression detection on synthetic step series with fixed seeds, and `rlbench compare` on records."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from rlbench.harness.record.regression import compare_samples, min_p_value, samples_needed
from tests.conftest import run_cli, synthetic_record

STEPS, NOISE = 30, 0.03  # 30 post-warm-up steps with 3% step-to-step noise


def _series(seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).normal(1.0, NOISE, STEPS)


def test_ten_percent_slowdown_is_caught():
    caught = [
        compare_samples(_series(s), _series(10_000 + s, 1.10), direction="lower").verdict == "regressed"
        for s in range(100)
    ]
    assert np.mean(caught) >= 0.99


def test_noise_alone_is_not_a_regression():
    # False-positive rate over 500 seeded pairs of identical distributions.
    flagged = [
        compare_samples(_series(s), _series(10_000 + s), direction="lower").verdict != "unchanged" for s in range(500)
    ]
    assert np.mean(flagged) <= 0.01


def test_direction_matters():
    base, faster = _series(1), _series(2, 1.10)
    assert compare_samples(base, faster, direction="higher").verdict == "improved"  # tokens/s up 10%
    assert compare_samples(base, faster, direction="lower").verdict == "regressed"  # step time up 10%
    assert compare_samples(base[:2], faster[:2], direction="lower").verdict == "undecidable"


@pytest.mark.parametrize(
    ("n_base", "n_cand", "floor"),
    [(3, 3, 0.1), (4, 4, 2 / 70), (3, 4, 2 / 35), (2, 7, 2 / 36), (2, 8, 2 / 45), (3, 5, 2 / 56), (1, 30, 2 / 31)],
)
def test_the_smallest_p_of_the_exact_test_is_two_over_the_binomial(n_base, n_cand, floor):
    assert min_p_value(n_base, n_cand) == pytest.approx(floor)
    # scipy's exact test on fully separated samples attains it: the floor is real, not a bound of ours.
    separated = mannwhitneyu(np.arange(n_cand) + 100.0, np.arange(n_base), alternative="two-sided", method="exact")
    assert separated.pvalue == pytest.approx(floor)


def test_a_doubling_over_three_steps_per_side_is_undecidable_not_unchanged():
    """The audit's case: 1.96x slower over 3 vs 3 post-warm-up steps came back 'unchanged' (p = 0.1)."""
    base = np.array([1.00, 1.02, 0.99])
    c = compare_samples(base, base * 1.96, direction="lower")
    assert c.verdict == "undecidable" and c.needed_per_side == samples_needed(0.05) == 4
    assert (c.n_base, c.n_cand) == (3, 3) and c.ratio == pytest.approx(1.96) and np.isnan(c.p_value)
    assert c.median_base == pytest.approx(1.00) and c.median_cand == pytest.approx(1.96)
    four = np.array([1.00, 1.02, 0.99, 1.01])
    assert compare_samples(four, four * 1.96, direction="lower").verdict == "regressed"  # 4 vs 4: p = 0.029


def test_ratio_and_bootstrap_interval():
    c = compare_samples(_series(1), _series(2, 1.10), direction="lower")
    assert c.ci_low <= c.ratio <= c.ci_high and c.ratio == pytest.approx(1.10, abs=0.03)


def test_compare_cli_exit_codes(tmp_path):
    base, same, slow = (
        synthetic_record(tmp_path / name, _series(int(scale * 100), scale))
        for name, scale in (("a", 1.0), ("b", 1.001), ("c", 1.2))
    )
    result = run_cli("compare", str(base), str(same))
    assert result.returncode == 0, result.stderr
    assert "step_time_s" in result.stdout and "unchanged" in result.stdout
    result = run_cli("compare", str(base), str(slow), "--threshold", "5%")
    assert result.returncode == 1 and "regressed: step_time_s, tokens_per_s" in result.stdout
    assert run_cli("compare", str(base), str(slow), "--threshold", "50%").returncode == 0


def test_compare_exits_3_when_too_few_steps_leave_it_undecidable(tmp_path):
    base, slow = (synthetic_record(tmp_path / name, _series(1, scale)[:3]) for name, scale in (("a", 1.0), ("b", 1.96)))
    result = run_cli("compare", str(base), str(slow))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "3/3" in result.stdout and "undecidable" in result.stdout and "at least 4 per side" in result.stdout
    assert run_cli("compare", str(base), str(slow), "--accept-undecidable").returncode == 0


def test_different_configurations_are_not_compared(tmp_path):
    base = synthetic_record(tmp_path / "a", _series(100))
    other = synthetic_record(tmp_path / "b", _series(100), version=2)
    result = run_cli("compare", str(base), str(other))
    assert result.returncode == 2 and "records differ in workload" in result.stderr
    result = run_cli("compare", str(base), str(tmp_path / "missing"))
    assert result.returncode == 2 and "not a run record folder" in result.stderr


def _data(sha256: str, origin: str = "embedded") -> dict:
    return {
        "dataset": "gsm8k",
        "split": "train",
        "origin": origin,
        "location": "somewhere",
        "revision": None,
        "problems": 7473,
        "sha256": sha256,
    }


def test_records_of_different_problems_are_not_compared(tmp_path):
    base = synthetic_record(tmp_path / "a", _series(100), data=_data("a" * 64))
    other = synthetic_record(tmp_path / "b", _series(101), data=_data("b" * 64, origin="local"))
    result = run_cli("compare", str(base), str(other))
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: records trained on different problems: ")
    assert f"{base} read embedded somewhere, sha256 aaaaaaaaaaaa" in line
    assert f"{other} read local somewhere, sha256 bbbbbbbbbbbb" in line


def test_same_problems_from_two_copies_compare(tmp_path):
    base = synthetic_record(tmp_path / "a", _series(100), data=_data("c" * 64))
    other = synthetic_record(tmp_path / "b", _series(101), data=_data("c" * 64, origin="local"))
    result = run_cli("compare", str(base), str(other))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "data" not in result.stderr


def test_a_record_without_data_identity_is_compared_with_a_notice(tmp_path):
    base = synthetic_record(tmp_path / "a", _series(100))  # written before run.json had `data`
    other = synthetic_record(tmp_path / "b", _series(101), data=_data("c" * 64))
    result = run_cli("compare", str(base), str(other))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nothing shows that both runs trained on the same problems" in result.stderr


def test_compare_refuses_impossible_values_and_an_empty_comparison(tmp_path):
    """A negative step time read as `improved`, and two records with nothing to compare exited 0 with an empty
    table: both are one error line now (exit 2)."""
    base = synthetic_record(tmp_path / "a", _series(1)[:5])
    negative = synthetic_record(tmp_path / "b", -_series(1)[:5])
    result = run_cli("compare", str(base), str(negative))
    assert result.returncode == 2 and "step_time_s has negative values" in result.stderr, result.stdout
    import json

    empty = synthetic_record(tmp_path / "c", _series(1)[:5])
    record = json.loads((empty / "run.json").read_text())
    record["workload"]["warmup_steps"] = 6  # every step a warm-up step: no post-warm-up step to compare
    (empty / "run.json").write_text(json.dumps(record))
    result = run_cli("compare", str(base), str(empty))
    assert result.returncode == 2 and "nothing to compare" in result.stderr and result.stdout == ""


def test_a_large_change_the_test_cannot_confirm_is_inconclusive_not_unchanged():
    """The audit's night: step time x4.96 printed as "unchanged" beside that ratio, because noisy steps left
    p above 0.05. Hand-computed: 5 vs 5 steps whose ranks interleave (p = 0.69 two-sided), medians 1.0 and 4.96."""
    base = np.array([1.0, 9.0, 0.9, 8.0, 1.0])
    cand = np.array([4.96, 0.95, 9.5, 4.96, 0.8])
    c = compare_samples(base, cand, direction="lower")
    assert c.ratio == pytest.approx(4.96) and c.p_value > 0.05 and c.verdict == "inconclusive"
    within = compare_samples(base, base * 1.01, direction="lower")
    assert within.verdict == "unchanged"  # inside the threshold: unchanged whatever p says


def test_a_metric_without_variation_is_unchanged_not_blamed_on_n():
    """Reward 0 at every step on both sides (the tiny model): its ratio was NaN and compare exit 3 asked for more
    steps; two samples of one constant are unchanged, and a ratio to a zero median stays undecidable."""
    zeros = np.zeros(5)
    c = compare_samples(zeros, zeros, direction="higher")
    assert (c.verdict, c.ratio, c.n_base) == ("unchanged", 1.0, 5)
    assert compare_samples(zeros, np.array([0.0, 0.5, 0.0, 0.0, 0.5]), direction="higher").verdict == "undecidable"


def test_compare_exits_3_on_an_inconclusive_change(tmp_path):
    base = synthetic_record(tmp_path / "a", [1.0, 9.0, 0.9, 8.0, 1.0])
    noisy = synthetic_record(tmp_path / "b", [4.96, 0.95, 9.5, 4.96, 0.8])
    result = run_cli("compare", str(base), str(noisy))
    assert result.returncode == 3 and "inconclusive: step_time_s moved x4.96" in result.stdout, result.stdout


def _as_framework(record, name: str, wall_times, data: dict):
    import json

    import pandas as pd

    run = json.loads((record / "run.json").read_text())
    run["framework"] = {"name": name}
    run["data"] = data
    (record / "run.json").write_text(json.dumps(run))
    steps = pd.read_parquet(record / "steps.parquet")
    steps["wall_step_time_s"] = [9.0, *wall_times]
    steps.to_parquet(record / "steps.parquet")
    return record


def test_two_frameworks_on_equal_work_get_a_verdict(tmp_path):
    """`compare <verl> <openrlhf>` was refused ("records differ in framework"): comparing frameworks on equal work
    is the suite's purpose. The verdict rests on wall_step_time_s, the one definition; hand-computed: 6 vs 6
    steps with no overlap and no ties give p = 2/924 = 0.0022 (exact), medians 2.005 and 1.605 (x0.8)."""
    data = {"dataset": "gsm8k", "sha256": "a" * 64, "origin": "embedded", "location": "x"}
    base = _as_framework(synthetic_record(tmp_path / "v", [3.0] * 6), "verl", [2.0, 2.1, 1.9, 2.05, 1.95, 2.01], data)
    cand = _as_framework(
        synthetic_record(tmp_path / "o", [1.0] * 6), "openrlhf", [1.6, 1.65, 1.55, 1.61, 1.62, 1.58], data
    )
    result = run_cli("compare", str(base), str(cand))
    assert result.returncode == 0, result.stderr
    assert "two frameworks on equal work: verl (baseline) and openrlhf" in result.stderr
    (verdict,) = [line for line in result.stdout.splitlines() if line.startswith("verdict:")]
    assert verdict.startswith("verdict: openrlhf is faster than verl in wall step time (x0.8 ")
    assert "p = 0.0022" in verdict and "n = 6/6" in verdict
    few = _as_framework(synthetic_record(tmp_path / "f", [1.0] * 2), "openrlhf", [1.6, 1.61], data)
    result = run_cli("compare", str(base), str(few))
    assert result.returncode == 3 and "not distinguishable (too few steps)" in result.stdout
    # without a data identity nothing shows both trained on the same problems: refused
    plain = synthetic_record(tmp_path / "p", [1.0] * 6)
    result = run_cli("compare", str(base), str(_as_framework(plain, "openrlhf", [1.6] * 6, {})))
    assert result.returncode == 2
