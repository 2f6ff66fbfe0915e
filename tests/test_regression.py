"""Regression detection on synthetic step series with fixed seeds, and `rlbench compare` on records."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from rlbench.record import write_run_json, write_steps
from rlbench.regression import compare_samples
from rlbench.workloads.catalog import load_workload
from tests.conftest import run_cli

STEPS, NOISE = 30, 0.03  # 30 post-warm-up steps with 3% step-to-step noise


def _series(seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).normal(1.0, NOISE, STEPS)


def test_ten_percent_slowdown_is_caught():
    caught = [compare_samples(_series(s), _series(10_000 + s, 1.10), direction="lower").verdict == "regressed"
              for s in range(100)]
    assert np.mean(caught) >= 0.99


def test_noise_alone_is_not_a_regression():
    # False-positive rate over 500 seeded pairs of identical distributions.
    flagged = [compare_samples(_series(s), _series(10_000 + s), direction="lower").verdict != "unchanged"
               for s in range(500)]
    assert np.mean(flagged) <= 0.01


def test_direction_matters():
    base, faster = _series(1), _series(2, 1.10)
    assert compare_samples(base, faster, direction="higher").verdict == "improved"  # tokens/s up 10%
    assert compare_samples(base, faster, direction="lower").verdict == "regressed"  # step time up 10%
    assert compare_samples(base[:2], faster[:2], direction="lower").verdict == "insufficient"


def test_ratio_and_bootstrap_interval():
    c = compare_samples(_series(1), _series(2, 1.10), direction="lower")
    assert c.ci_low <= c.ratio <= c.ci_high and c.ratio == pytest.approx(1.10, abs=0.03)


def _record(folder, scale: float, version: int = 1):
    folder.mkdir()
    workload = dataclasses.asdict(load_workload("gsm8k-grpo-tiny").with_steps(STEPS + 1)) | {"version": version}
    write_run_json(folder, {"status": "succeeded", "framework": {"name": "trl"}, "workload": workload,
                            "parallel": {"dp": 1}})
    times = np.concatenate([[9.0], _series(int(scale * 100), scale)])
    write_steps(folder, pd.DataFrame({"step": range(1, STEPS + 2), "step_time_s": times,
                                      "tokens_per_s": 1000 / times}))
    return folder


def test_compare_cli_exit_codes(tmp_path):
    base, same, slow = _record(tmp_path / "a", 1.0), _record(tmp_path / "b", 1.001), _record(tmp_path / "c", 1.2)
    result = run_cli("compare", str(base), str(same))
    assert result.returncode == 0, result.stderr
    assert "step_time_s" in result.stdout and "unchanged" in result.stdout
    result = run_cli("compare", str(base), str(slow), "--threshold", "5%")
    assert result.returncode == 1 and "regressed: step_time_s, tokens_per_s" in result.stdout
    assert run_cli("compare", str(base), str(slow), "--threshold", "50%").returncode == 0


def test_different_configurations_are_not_compared(tmp_path):
    base, other = _record(tmp_path / "a", 1.0), _record(tmp_path / "b", 1.0, version=2)
    result = run_cli("compare", str(base), str(other))
    assert result.returncode == 2 and "records differ in workload" in result.stderr
    result = run_cli("compare", str(base), str(tmp_path / "missing"))
    assert result.returncode == 2 and "not a run record folder" in result.stderr
