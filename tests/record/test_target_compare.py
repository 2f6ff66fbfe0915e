"""Time to target compared between sweep configurations (record.target_compare, `rlbench compare SWEEP [SWEEP]`),
on hand-made sweep indexes whose rank-test results are computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.spread import target_spread
from rlbench.harness.record.sweep_index import INDEX_FILE, SWEEP_SCHEMA_VERSION
from rlbench.harness.record.target_compare import compare_sweep_targets, compare_within_sweep, pairwise
from tests.conftest import run_cli

FAST = [10.0, 11.0, 12.0, 13.0, 14.0]
SLOW = [20.0, 21.0, 22.0, 23.0, 24.0]  # every run slower than every FAST run
NEAR = [10.5, 11.5, 12.5, 13.5, 14.5]  # interleaved with FAST


def _target(seconds: list[float | None], value: float = 0.4) -> dict:
    runs = [
        {"metric": "reward_mean", "value": value, "reached": s is not None, "seconds": s, "step": 5} for s in seconds
    ]
    return target_spread(runs)


def _group(framework: str, seconds: list[float | None], workload: str = "gsm8k-format-grpo-tiny", value=0.4) -> dict:
    return {"framework": framework, "workload": workload, "parallel": {}, "target": _target(seconds, value)}


def _sweep(folder: Path, *groups: dict) -> Path:
    folder.mkdir(parents=True)
    index = {"schema_version": SWEEP_SCHEMA_VERSION, "sweep_id": folder.name, "request": {}, "cells": []}
    (folder / INDEX_FILE).write_text(json.dumps({**index, "groups": list(groups)}))
    return folder


def test_each_pair_of_one_sweeps_configurations_gets_a_verdict(tmp_path):
    sweep = _sweep(tmp_path / "s", _group("trl", FAST), _group("verl", SLOW), _group("openrlhf", NEAR))
    groups, (trl_verl, trl_openrlhf, verl_openrlhf) = compare_within_sweep(sweep)
    assert [g["framework"] for g in groups] == ["trl", "verl", "openrlhf"]
    # 5 against 5, fully separated: U = 0, exact two-sided p = 2 / C(10, 5) = 2 / 252
    assert trl_verl["verdict"] == "slower" and trl_verl["p_value"] == pytest.approx(2 / 252)
    assert trl_verl["ratio"] == pytest.approx(22 / 12) and "verl gsm8k-format-grpo-tiny" in trl_verl["line"]
    # interleaved: U = 10 of 25; P(U <= 10) = 87 / 252 for 5 and 5, so p = 174 / 252
    assert trl_openrlhf["verdict"] == "not distinguishable" and trl_openrlhf["p_value"] == pytest.approx(174 / 252)
    assert verl_openrlhf["verdict"] == "faster" and verl_openrlhf["base"].startswith("verl")


def test_two_seeds_a_side_cannot_decide_and_say_so():
    (pair,) = pairwise([("a", "w", _target([10.0, 11.0])), ("b", "w", _target([20.0, 21.0]))])
    assert pair["verdict"] == "undecidable" and pair["p_value"] is None
    assert "smallest p is 0.33" in pair["why"]  # 2 / C(4, 2)


def test_runs_that_never_reached_rank_slowest():
    (pair,) = pairwise([("a", "w", _target(FAST)), ("b", "w", _target([None] * 5))])
    assert pair["verdict"] == "slower" and pair["reached_cand"] == 0 and pair["ratio"] is None


def test_a_pair_on_another_target_is_not_compared():
    (pair,) = pairwise([("a", "w", _target(FAST)), ("b", "w", _target(SLOW, value=0.6))])
    assert pair["verdict"] is None and pair["line"].startswith("not compared: the targets differ")


def test_one_sweep_needs_two_configurations_with_a_target(tmp_path):
    with pytest.raises(RLBenchError, match="found 1 .*pass a second sweep"):
        compare_within_sweep(_sweep(tmp_path / "s", _group("trl", FAST)))


def test_two_sweeps_compare_their_one_configuration_each(tmp_path):
    base = _sweep(tmp_path / "a", _group("trl", FAST))
    cand = _sweep(tmp_path / "b", _group("trl", SLOW))
    first, second, found = compare_sweep_targets(base, cand)
    assert first["target"]["seconds_per_run"] == FAST and second["target"]["seconds_per_run"] == SLOW
    assert found["verdict"] == "slower" and found["p_value"] == pytest.approx(2 / 252)


def test_two_sweeps_refuse_a_sweep_of_several_configurations(tmp_path):
    several = _sweep(tmp_path / "a", _group("trl", FAST), _group("verl", SLOW))
    with pytest.raises(RLBenchError, match="found 2 .*pass this sweep alone"):
        compare_sweep_targets(several, _sweep(tmp_path / "b", _group("trl", SLOW)))


def test_two_sweeps_refuse_different_targets(tmp_path):
    base = _sweep(tmp_path / "a", _group("trl", FAST))
    other = _sweep(tmp_path / "b", _group("trl", SLOW, workload="other-workload"))
    with pytest.raises(RLBenchError, match="the targets differ .*compare sweeps of one workload and target"):
        compare_sweep_targets(base, other)


def test_the_cli_compares_one_sweep_and_exits_3_when_a_pair_cannot_decide(tmp_path):
    sweep = _sweep(tmp_path / "s", _group("trl", FAST), _group("verl", SLOW), _group("openrlhf", [10.0, 11.0]))
    result = run_cli("compare", str(sweep))
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("trl gsm8k-format-grpo-tiny defaults: time to reward_mean >= 0.4: reached in 5/5")
    assert sum(line.startswith("verdict: ") for line in lines) == 3 and "cannot be told apart" in result.stdout
    assert run_cli("compare", str(sweep), "--accept-undecidable").returncode == 0


def test_the_cli_refuses_one_path_that_is_not_a_sweep_in_one_line(tmp_path):
    result = run_cli("compare", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is not a sweep folder" in result.stderr and len(result.stderr.strip().splitlines()) == 1
