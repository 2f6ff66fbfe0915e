"""Time to target and its MLPerf-style scoring over seeds, against hand-computed cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rlbench.harness.record.olympic import compare_times, olympic_score, smallest_p
from rlbench.harness.record.time_to_target import price_target, time_to_target, training_seconds

TARGET = {"metric": "reward_mean", "value": 0.5, "window": 3, "stop": True}


def _steps(rewards: list[float], step_s: float = 2.0, start: float = 1000.0) -> pd.DataFrame:
    n = len(rewards)
    return pd.DataFrame(
        {
            "step": range(1, n + 1),
            "reward_mean": rewards,
            "step_start_unix_s": [start + i * step_s for i in range(n)],
            "step_end_unix_s": [start + (i + 1) * step_s for i in range(n)],
            "wall_step_time_s": [step_s] * n,
            "total_tokens": [100.0] * n,
            "energy_j": [float("nan")] * n,
        }
    )


def test_reached_at_the_first_step_whose_moving_mean_holds():
    # moving means over 3 steps: -, -, 0.2, 0.4, 0.5 (step 5: (0.3 + 0.6 + 0.6) / 3), so step 5
    steps = _steps([0.0, 0.3, 0.3, 0.6, 0.6, 0.9, 0.0])
    found = time_to_target(steps, TARGET, launched_unix_s=990.0, gpus=0)
    assert found["reached"] and found["step"] == 5
    assert found["seconds"] == pytest.approx(10.0)  # steps 1-5 at 2 s, from the first step's start
    assert found["seconds_from_launch"] == pytest.approx(20.0)  # start-up of 10 s included
    assert found["tokens"] == pytest.approx(500.0)
    assert "gpu_hours" not in found  # a CPU run has none


def test_a_single_lucky_step_is_not_the_target():
    found = time_to_target(_steps([0.0, 1.0, 0.0, 0.0, 0.0]), TARGET, None, gpus=0)
    assert not found["reached"] and found["steps_run"] == 5
    assert found["best_moving_mean"] == pytest.approx(1 / 3)


def test_gpu_runs_count_gpu_hours():
    found = time_to_target(_steps([1.0, 1.0, 1.0], step_s=1200.0), TARGET, None, gpus=8)
    assert found["reached"] and found["step"] == 3
    assert found["gpu_hours"] == pytest.approx(8.0)  # 8 GPUs x 3600 s


def test_reaching_the_target_is_priced_at_the_gpu_hour_and_energy_prices():
    steps = _steps([1.0, 1.0, 1.0], step_s=1200.0).assign(energy_j=[1.2e6] * 3)  # 3.6e6 J = 1 kWh in all
    found = time_to_target(steps, TARGET, None, gpus=8)
    assert price_target(found, 2.5, 0.0) == {"cost_usd": pytest.approx(20.0), "gpu_hour_usd": 2.5}  # 8 GPU-h
    assert price_target(found, 2.5, 0.15)["cost_usd"] == pytest.approx(20.15)  # + 1 kWh at 0.15


@pytest.mark.parametrize(
    "gpus, rewards, price, kwh, why",
    [
        (8, [1.0] * 3, None, 0.0, "no price for this GPU"),
        (0, [1.0] * 3, 2.5, 0.0, "no GPU"),
        (8, [0.0] * 3, 2.5, 0.0, "not reached"),
        (8, [1.0] * 3, 2.5, 0.15, "no energy was measured"),  # _steps' energy is NaN: never priced as 0 kWh
    ],
)
def test_an_unpriced_target_says_why(gpus, rewards, price, kwh, why):
    found = time_to_target(_steps(rewards), TARGET, None, gpus=gpus)
    priced = price_target(found, price, kwh)
    assert priced["cost_usd"] is None and why in priced["cost_why"]


def test_training_seconds_use_the_step_stamps_else_the_summed_step_times():
    steps = _steps([0.0] * 3, step_s=2.0)
    assert training_seconds(steps).tolist() == [2.0, 4.0, 6.0]
    unstamped = steps.drop(columns=["step_start_unix_s", "step_end_unix_s"]).assign(wall_step_time_s=[1.0, 2.0, 4.0])
    assert training_seconds(unstamped).tolist() == [1.0, 3.0, 7.0]
    assert training_seconds(unstamped.drop(columns="wall_step_time_s")) is None


def test_no_metric_is_not_reached():
    found = time_to_target(_steps([0.1]).drop(columns="reward_mean"), TARGET, None, gpus=0)
    assert not found["reached"] and "reward_mean" in found["why"]


def test_olympic_drops_the_fastest_and_the_slowest():
    # sorted 38.5, 39.9, 40.2, 41.0, 60.0: kept 39.9, 40.2, 41.0
    scored = olympic_score([41.0, 38.5, 60.0, 40.2, 39.9])
    assert scored["score"] == pytest.approx((39.9 + 40.2 + 41.0) / 3)
    assert scored["median"] == pytest.approx(40.2)
    assert scored["std"] == pytest.approx(0.5686240703, rel=1e-6)
    assert scored["n"] == 5 and scored["reached"] == 5 and not scored["notes"]


def test_one_run_that_never_reaches_the_target_is_the_dropped_slowest():
    scored = olympic_score([41.0, 38.5, None, 40.2, 39.9])
    assert scored["score"] == pytest.approx((39.9 + 40.2 + 41.0) / 3)
    assert scored["reached"] == 4 and scored["max"] == 41.0


def test_two_runs_that_never_reach_it_leave_no_score():
    scored = olympic_score([41.0, None, None, 40.2, 39.9])
    assert scored["score"] is None and scored["median"] == pytest.approx(41.0)
    assert any("2 of 5 runs did not reach" in note for note in scored["notes"])
    assert olympic_score([None, None, 1.0])["median"] is None


def test_small_n_says_what_it_cannot_do():
    scored = olympic_score([10.0, 12.0])
    assert scored["score"] is None and scored["median"] == pytest.approx(11.0)
    assert any("needs 3 runs" in note for note in scored["notes"])
    assert any("at least 5 seeds" in note for note in scored["notes"])


def test_the_smallest_p_of_a_rank_test():
    assert smallest_p(2, 2) == pytest.approx(1 / 3)  # 2 / C(4, 2)
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(0, 5) == 1.0


def test_compare_cannot_decide_at_small_n():
    verdict = compare_times([10.0, 11.0], [20.0, 21.0])
    assert verdict["verdict"] == "undecidable" and verdict["p_value"] is None
    assert "smallest p is 0.33" in verdict["why"]
    assert verdict["ratio"] == pytest.approx(20.5 / 10.5)


def test_compare_separates_five_seeds_each():
    fast, slow = [10.0, 11.0, 12.0, 13.0, 14.0], [20.0, 21.0, 22.0, None, 24.0]
    verdict = compare_times(slow, fast)
    assert verdict["verdict"] == "faster" and verdict["p_value"] == pytest.approx(2 / 252)
    assert verdict["reached_base"] == 4 and verdict["median_base"] == pytest.approx(22.0)
    assert compare_times(fast, slow)["verdict"] == "slower"


def test_compare_overlapping_seeds_is_not_distinguishable():
    verdict = compare_times([10.0, 12.0, 14.0, 16.0, 18.0], [11.0, 13.0, 15.0, 17.0, 19.0])
    assert verdict["verdict"] == "not distinguishable" and verdict["p_value"] > 0.05


def test_infinite_times_are_runs_that_did_not_reach():
    assert olympic_score([math.inf, 1.0, 2.0, 3.0])["reached"] == 3


EVAL_TARGET = {"metric": "eval_accuracy", "value": 0.5, "window": 2, "stop": True, "eval_every": 2, "eval_problems": 8}


def test_eval_accuracy_is_judged_on_the_evaluations_alone():
    # evaluations at steps 2, 4, 6: 0.25, 0.5, 0.75; the mean of the last 2 evaluations first reaches 0.5 at
    # step 6 ((0.5 + 0.75) / 2 = 0.625; at step 4 it is 0.375); the NaN steps between count for nothing
    steps = _steps([0.9] * 7)
    steps["eval_accuracy"] = [math.nan, 0.25, math.nan, 0.5, math.nan, 0.75, math.nan]
    found = time_to_target(steps, EVAL_TARGET, launched_unix_s=None, gpus=0)
    assert found["reached"] and found["step"] == 6 and found["steps_run"] == 7
    assert found["seconds"] == pytest.approx(12.0) and found["tokens"] == pytest.approx(600.0)
    assert found["best_moving_mean"] == pytest.approx(0.625)
    assert (found["eval_every"], found["eval_problems"]) == (2, 8)
    assert found["curve"] == [
        {"step": 2, "eval_accuracy": 0.25, "seconds": pytest.approx(4.0), "tokens": pytest.approx(200.0)},
        {"step": 4, "eval_accuracy": 0.5, "seconds": pytest.approx(8.0), "tokens": pytest.approx(400.0)},
        {"step": 6, "eval_accuracy": 0.75, "seconds": pytest.approx(12.0), "tokens": pytest.approx(600.0)},
    ]


def test_a_training_reward_high_enough_does_not_reach_an_eval_target():
    steps = _steps([1.0] * 4)
    steps["eval_accuracy"] = [math.nan, 0.0, math.nan, 0.25]
    found = time_to_target(steps, EVAL_TARGET, None, gpus=0)
    assert not found["reached"] and found["best_moving_mean"] == pytest.approx(0.125)
    assert [point["step"] for point in found["curve"]] == [2, 4]


def test_a_run_that_never_evaluated_says_so():
    found = time_to_target(_steps([1.0] * 3), EVAL_TARGET, None, gpus=0)
    assert not found["reached"] and "eval_accuracy" in found["why"]


def test_a_step_that_logged_no_reward_counts_for_nothing_in_every_reader():
    """Time to target, the nightly's convergence curve and the report's quality curve share one rule: the window
    spans the steps that logged the metric (here step 3 logged no reward: the mean at step 4 is of steps 1, 2, 4)."""
    from pathlib import Path

    from rlbench.harness.record.convergence import target_curve
    from rlbench.reports.load import RunView
    from rlbench.reports.quality import _curve

    steps = _steps([0.3, 0.6, math.nan, 0.6, 0.0])
    found = time_to_target(steps, TARGET, None, gpus=0)
    assert found["reached"] and found["step"] == 4 and found["tokens"] == pytest.approx(400.0)
    assert target_curve(steps, "reward_mean", 3).to_dict() == pytest.approx({4: 0.5, 5: 0.4})
    run = RunView(Path("."), {"target": TARGET}, steps, None, None, None, "run")
    drawn = _curve(run).dropna(subset=["quality"])
    assert drawn["step"].tolist() == [4, 5] and drawn["quality"].tolist() == pytest.approx([0.5, 0.4])
    assert drawn["seconds"].tolist() == pytest.approx([8.0, 10.0])  # seconds still count the step without one
