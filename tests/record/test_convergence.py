"""The convergence reference: a run's curve against the band of its configuration's first clean runs, built from
hand-made curves (record.convergence) and, through the nightly gate, from hand-made records."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.nightly.gate import format_night, judge, night_status
from rlbench.harness.record.convergence import band, reference_check, target_curve
from rlbench.harness.record.run_record import write_run_json
from rlbench.harness.record.store import write_steps
from rlbench.harness.record.time_to_target import time_to_target
from rlbench.workloads.catalog import load_workload


def _curve(values: list[float], first_step: int = 1) -> pd.Series:
    return pd.Series(values, index=range(first_step, first_step + len(values)), dtype=float)


REFERENCE = [_curve([0.1, 0.2, 0.4, 0.6]), _curve([0.0, 0.3, 0.5, 0.7]), _curve([0.2, 0.25, 0.45, 0.65])]


def test_the_band_is_each_steps_min_to_max_with_n():
    edges = band(REFERENCE + [_curve([0.9], first_step=4)])
    assert edges.loc[1].tolist() == pytest.approx([3, 0.0, 0.2, 0.1])
    assert edges.loc[4, "n"] == 4 and edges.loc[4, "min"] == 0.6 and edges.loc[4, "max"] == 0.9


def test_a_curve_inside_the_band_is_within():
    check = reference_check(_curve([0.1, 0.25, 0.42, 0.66]), REFERENCE)
    assert check["verdict"] == "within" and not check["flagged"] and check["compared_steps"] == 4


def test_a_curve_below_the_band_beyond_the_tolerance_is_flagged_at_its_first_step():
    # step 3: 0.3 against a band 0.4-0.5, minus 0.05 -> below; step 2: 0.16 is inside 0.2 - 0.05
    check = reference_check(_curve([0.0, 0.16, 0.3, 0.5]), REFERENCE)
    assert check["verdict"] == "below" and check["flagged"] and check["below_steps"] == [3, 4]
    assert check["first_below"] == {"step": 3, "value": 0.3, "band_min": 0.4, "band_max": 0.5, "n": 3}
    # within the tolerance is not flagged: 0.36 is 0.04 under the band's 0.4
    assert not reference_check(_curve([0.0, 0.2, 0.36, 0.6]), REFERENCE)["flagged"]
    # above the band is faster learning: reported, never flagged
    above = reference_check(_curve([0.5, 0.6, 0.7, 0.9]), REFERENCE)
    assert above["verdict"] == "within" and above["above_steps"] == [1, 2, 3, 4]


def test_too_few_reference_runs_say_so_and_judge_nothing():
    check = reference_check(_curve([0.0, 0.0, 0.0, 0.0]), REFERENCE[:2])
    assert check["verdict"] == "not judged" and not check["flagged"]
    assert "2 run(s), fewer than the 3" in check["why"]


def test_steps_the_reference_runs_did_not_reach_are_not_compared():
    # the reference runs stopped at step 4 (their target): a slower run's steps 5-8 have no band
    check = reference_check(_curve([0.1, 0.2, 0.4, 0.6, 0.0, 0.0, 0.0, 0.0]), REFERENCE)
    assert check["compared_steps"] == 4 and check["verdict"] == "within"


def test_the_curve_is_any_metrics_moving_mean_by_step():
    steps = pd.DataFrame({"step": [3, 1, 2, 4], "eval_accuracy": [0.5, 0.1, 0.3, 0.7]})
    curve = target_curve(steps, "eval_accuracy", window=2)
    assert curve.to_dict() == pytest.approx({2: 0.2, 3: 0.4, 4: 0.6})
    assert target_curve(steps, "reward_mean", window=2) is None


def test_an_eval_curve_counts_evaluations_not_steps():
    # evaluations every 2 steps (NaN between): the window of 2 spans two evaluations, as time to target judges it
    nan = float("nan")
    steps = pd.DataFrame({"step": [1, 2, 3, 4, 5, 6], "eval_accuracy": [nan, 0.25, nan, 0.5, nan, 0.75]})
    assert target_curve(steps, "eval_accuracy", window=2).to_dict() == pytest.approx({4: 0.375, 6: 0.625})


# Through the nightly gate: hand-made records of the learnable workload in a baseline folder.
WORKLOAD = dataclasses.asdict(load_workload("gsm8k-format-grpo-tiny"))
TARGET = WORKLOAD["target"]


def _record(folder: Path, rewards: list[float], seed: int, started: str, data_sha: str = "a" * 64) -> Path:
    n = len(rewards)
    steps = pd.DataFrame(
        {
            "step": range(1, n + 1),
            "reward_mean": rewards,
            "step_time_s": [1.0] * n,
            "step_start_unix_s": [100.0 + i for i in range(n)],
            "step_end_unix_s": [101.0 + i for i in range(n)],
        }
    )
    folder.mkdir(parents=True)
    record = {
        "status": "succeeded",
        "framework": {"name": "trl"},
        "workload": WORKLOAD,
        "parallel": {"dp": 1},
        "seed": seed,
        "started_at": started,
        "data": {"origin": "embedded", "location": "x", "sha256": data_sha},
        "target": time_to_target(steps, TARGET, 90.0, gpus=0),
    }
    write_run_json(folder, record)
    write_steps(folder, steps)
    return folder


LEARNS = [[0.0, 0.1, 0.3, 0.5, 0.6, 0.7], [0.1, 0.2, 0.3, 0.4, 0.6, 0.6], [0.0, 0.2, 0.4, 0.5, 0.5, 0.7]]


def _reference(baseline: Path) -> None:
    for seed, rewards in enumerate(LEARNS):
        _record(baseline / f"ref{seed}", rewards, seed, f"2026-11-0{seed + 1}")


def test_the_night_fails_on_a_run_that_learns_below_its_reference(tmp_path):
    _reference(tmp_path / "baseline")
    slow = _record(tmp_path / "night" / "slow", [0.0, 0.0, 0.0, 0.1, 0.1, 0.2], 7, "2026-12-01")
    verdict = judge(slow, tmp_path / "baseline", 0.05)
    assert verdict["reference"]["verdict"] == "below" and verdict["reference"]["seeds"] == [0, 1, 2]
    assert "convergence" in verdict["regressed"]
    entry = {"framework": "trl", "workload": "gsm8k-format-grpo-tiny", "parallel": [], "status": "succeeded"}
    night = {"benchmarks": [{**entry, **verdict}]}
    night["status"] = night_status(night["benchmarks"])
    text = format_night(night)
    assert night["status"] == "regressed" and "REGRESSED" in text and "convergence" in text
    assert "BELOW the band" in text and "time to reward_mean >= 0.4: not reached in 6 step(s)" in text


def test_a_run_that_learns_like_its_reference_passes_the_check(tmp_path):
    _reference(tmp_path / "baseline")
    same = _record(tmp_path / "night" / "same", [0.1, 0.1, 0.3, 0.5, 0.6, 0.6], 8, "2026-12-01")
    verdict = judge(same, tmp_path / "baseline", 0.05)
    assert verdict["reference"]["verdict"] == "within" and "convergence" not in verdict["regressed"]
    assert verdict["target"]["reached"] and verdict["target"]["step"] == 5  # mean of 0.3, 0.5, 0.6 >= 0.4


def test_the_first_five_clean_runs_are_the_reference_and_later_ones_do_not_move_it(tmp_path):
    _reference(tmp_path / "baseline")
    for seed, rewards in ((3, LEARNS[0]), (4, LEARNS[1])):
        _record(tmp_path / "baseline" / f"ref{seed}", rewards, seed, f"2026-11-0{seed + 1}")
    for n in range(2):  # records copied in later that learned nothing would widen the band down to 0
        _record(tmp_path / "baseline" / f"late{n}", [0.0] * 6, 10 + n, f"2026-11-2{n}")
    slow = _record(tmp_path / "night" / "slow", [0.0, 0.0, 0.0, 0.1, 0.1, 0.2], 7, "2026-12-01")
    reference = judge(slow, tmp_path / "baseline", 0.05)["reference"]
    assert [Path(r).name for r in reference["runs"]] == [f"ref{n}" for n in range(5)]
    assert reference["n_reference"] == 5 and reference["verdict"] == "below"
    assert "note" not in reference  # five seeds: a band of seeds


def test_too_few_reference_runs_and_another_configuration_are_not_judged(tmp_path):
    _record(tmp_path / "baseline" / "ref0", LEARNS[0], 0, "2026-11-01")
    _record(tmp_path / "baseline" / "other-data", LEARNS[1], 1, "2026-11-02", data_sha="b" * 64)
    _record(tmp_path / "baseline" / "other-data2", LEARNS[2], 2, "2026-11-03", data_sha="b" * 64)
    slow = _record(tmp_path / "night" / "slow", [0.0] * 6, 7, "2026-12-01")
    verdict = judge(slow, tmp_path / "baseline", 0.05)
    assert verdict["reference"]["verdict"] == "not judged" and verdict["reference"]["n_reference"] == 1
    assert "convergence" not in verdict["regressed"]
    assert "not judged (the reference has 1 run(s)" in verdict["reference"]["text"]


def test_a_reference_of_one_seed_says_its_band_is_not_the_seeds(tmp_path):
    for n, rewards in enumerate(LEARNS):  # three nights of the nightly's one seed
        _record(tmp_path / "baseline" / f"night{n}", rewards, 0, f"2026-11-0{n + 1}")
    same = _record(tmp_path / "night" / "same", LEARNS[0], 0, "2026-12-01")
    reference = judge(same, tmp_path / "baseline", 0.05)["reference"]
    assert reference["verdict"] == "within" and "run-to-run spread, not the seeds'" in reference["text"]
