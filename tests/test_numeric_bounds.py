"""Numbers a user gives are bounded and finite: each refusal is one `error:` line and exit 2 (issue: hostile
input took 3.5 GB for a mistyped --steps, crashed the sampler at RLBENCH_SAMPLE_HZ=1e-300, and accepted nan/inf)."""

from __future__ import annotations

import json

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.settings import run_timeout_s, sample_hz
from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--steps", "99999999999999999999"],
            "1<=x<=100000",
        ),
        (["run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--seed", "99999999999999999999999"], "0<=x<="),
        (["run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--seed", "-1"], "0<=x<="),
        (["sweep", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--steps", "100001"], "1<=x<=100000"),
        (
            ["predict", "--model-config", "Qwen/Qwen2.5-7B", "--workload", "math-grpo", "--hardware", "H100-SXM"]
            + ["--gpus", "8", "--gpu-hour-usd", "nan"],
            "not a finite number",
        ),
    ],
)
def test_options_out_of_range_are_one_line(args, words, tmp_path):
    result = run_cli(*args, *(["--dry-run"] if args[0] == "run" else []), cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("name", "value", "reader"),
    [
        ("RLBENCH_RUN_TIMEOUT_S", "inf", run_timeout_s),
        ("RLBENCH_RUN_TIMEOUT_S", "nan", run_timeout_s),
        ("RLBENCH_RUN_TIMEOUT_S", "1e12", run_timeout_s),
        ("RLBENCH_SAMPLE_HZ", "1e-300", sample_hz),
        ("RLBENCH_SAMPLE_HZ", "inf", sample_hz),
    ],
)
def test_settings_refuse_non_finite_and_absurd_values(monkeypatch, name, value, reader):
    monkeypatch.setenv(name, value)
    with pytest.raises(RLBenchError, match=name):
        reader()


def test_settings_keep_their_valid_range(monkeypatch):
    monkeypatch.setenv("RLBENCH_SAMPLE_HZ", "0")
    assert sample_hz() == 0  # off, for overhead A/B runs
    monkeypatch.setenv("RLBENCH_SAMPLE_HZ", "0.5")
    assert sample_hz() == 0.5
    monkeypatch.setenv("RLBENCH_RUN_TIMEOUT_S", "86400")
    assert run_timeout_s() == 86400


def test_a_workload_file_with_too_many_steps_is_refused(tmp_path):
    from rlbench.workloads.catalog import load_workload

    with pytest.raises((RLBenchError, ValueError), match="steps.*at most 100,000"):
        load_workload("gsm8k-grpo-tiny").with_steps(10**6)


def test_a_sweep_index_whose_version_is_true_is_damaged(tmp_path):
    from rlbench.harness.record.sweep_index import load_index

    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"schema_version": True, "cells": []}))
    with pytest.raises(RLBenchError, match="no integer schema_version"):
        load_index(tmp_path)
