"""Time to target in the report: one table row per configuration scored over its runs, and the quality plot."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.record.time_to_target import time_to_target
from rlbench.reports.load import load_run
from rlbench.reports.quality import HEADERS, VERDICT_HEADERS, quality_rows, quality_verdicts, quality_view

RECORD = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"
TARGET = {"metric": "reward_mean", "value": 0.5, "window": 2, "stop": True}


def _run(framework: str, rewards: list[float], seed: int, step_s: float = 1.0):
    n = len(rewards)
    steps = pd.DataFrame(
        {
            "step": range(1, n + 1),
            "reward_mean": rewards,
            "step_start_unix_s": [100.0 + i * step_s for i in range(n)],
            "step_end_unix_s": [100.0 + (i + 1) * step_s for i in range(n)],
            "wall_step_time_s": [step_s] * n,
            "total_tokens": [50.0] * n,
        }
    )
    run = load_run(RECORD)
    record = {
        **run.record,
        "framework": {**run.record["framework"], "name": framework},
        "seed": seed,
        "target": time_to_target(steps, TARGET, 90.0, gpus=0),
    }
    return dataclasses.replace(run, record=record, steps=steps, label=f"{framework} seed {seed}")


def test_rows_score_each_framework_over_its_seeds():
    runs = [
        _run("trl", [0.0, 0.6, 0.6, 0.6], 0),  # reached at step 3: 3 s
        _run("trl", [0.6, 0.6, 0.0, 0.0], 1),  # step 2: 2 s
        _run("trl", [0.0, 0.0, 0.0, 0.6, 0.6], 2),  # step 5: 5 s
        _run("verl", [0.0, 0.1, 0.2, 0.3], 0, step_s=4.0),  # never
    ]
    headers, rows = quality_rows(runs)
    assert headers == HEADERS
    trl, verl = rows
    assert trl[2] == "3/3" and trl[3].startswith("3 ± 0")  # olympic: drop 2 s and 5 s, keep 3 s
    assert trl[4] == "3" and trl[5] == "2-5" and trl[6] == "2, 3, 5"
    assert "MLPerf" in trl[7] and trl[0].endswith(" defaults")  # the knobs set away from default: none
    assert verl[2] == "0/1" and verl[3] == "–" and verl[4] == "–"


def test_the_view_draws_runs_with_targets_and_skips_without():
    drawn = quality_view([_run("trl", [0.0, 0.6, 0.6], 0), _run("verl", [0.1, 0.2, 0.3], 1)])
    assert drawn.svg and "<svg" in drawn.svg and "reached at step 3" in drawn.svg
    assert quality_view([load_run(RECORD)]).svg is None


def test_a_target_reached_at_the_window_counts_every_step_before_it():
    run = _run("trl", [0.6, 0.6], 0)
    assert run.record["target"]["step"] == 2 and run.record["target"]["seconds"] == pytest.approx(2.0)
    assert run.record["target"]["seconds_from_launch"] == pytest.approx(12.0)  # launched 10 s before step 1


def test_the_verdict_table_judges_each_pair_of_configurations():
    # trl reaches the target at step 2 (2 s) in every seed, verl at step 2 of 3 s steps (6 s): 5 against 5
    # fully separated gives the exact two-sided p = 2 / C(10, 5) = 2 / 252 = 0.0079
    runs = [_run("trl", [0.6, 0.6], seed) for seed in range(5)]
    runs += [_run("verl", [0.6, 0.6], seed, step_s=3.0) for seed in range(5)]
    runs += [_run("openrlhf", [0.6, 0.6], 0)]  # one seed: the rank test cannot decide
    headers, rows = quality_verdicts(runs)
    assert headers == VERDICT_HEADERS and len(rows) == 3
    verl_trl, openrlhf_trl, openrlhf_verl = rows
    assert verl_trl[:2] == ["verl gsm8k-grpo-tiny defaults", "trl gsm8k-grpo-tiny defaults"]
    assert verl_trl[2] == "x3" and verl_trl[3] == "5/5 runs, reached 5/5" and verl_trl[4] == "0.0079"
    assert verl_trl[5] == "slower"
    assert openrlhf_trl[5].startswith("undecidable: at n = 5/1") and openrlhf_trl[4] == "–"


def test_an_eval_target_draws_its_evaluations():
    import math

    from rlbench.reports.quality import _curve

    run = _run("trl", [0.0] * 6, 0)
    steps = run.steps.assign(eval_accuracy=[math.nan, 0.25, math.nan, 0.5, math.nan, 0.75])
    target = {"metric": "eval_accuracy", "value": 0.5, "window": 2, "eval_every": 2, "eval_problems": 4}
    run = dataclasses.replace(run, steps=steps, record={**run.record, "target": time_to_target(steps, target, 90, 0)})
    curve = _curve(run)
    assert curve["step"].tolist() == [2, 4, 6] and curve["quality"].tolist()[1:] == [0.375, 0.625]
    assert "reached at step 6" in quality_view([run]).svg
