"""The idle-time ledger: busy and waiting per role and step, one definition for colocated and disaggregated."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from rlbench.reports.idle_ledger import HEADERS, idle_rows, ledger, staleness_rows
from rlbench.reports.load import load_run

RECORD = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"


def _run(placement: str, steps: pd.DataFrame):
    run = load_run(RECORD)
    record = {**run.record, "parallel": {**run.record["parallel"], "placement": placement}}
    return dataclasses.replace(run, record=record, steps=steps)


STEPS = pd.DataFrame(
    {
        "step": [1, 2, 3],
        "wall_step_time_s": [9.0, 10.0, 12.0],
        "time_gen_s": [5.0, 6.0, 6.0],
        "time_update_actor_s": [2.0, 3.0, 3.0],
        "time_weight_sync_s": [0.5, 0.5, float("nan")],
    }
)


def test_colocated_has_one_role_busy_in_every_timed_stage():
    frame = ledger(_run("colocated", STEPS))["all devices (colocated)"]
    assert list(frame["step"]) == [2, 3]  # warm-up left out
    assert list(frame["busy_s"]) == [9.5, 9.0] and list(frame["waiting_s"]) == [0.5, 3.0]
    assert list(frame["waiting_share"]) == pytest.approx([0.05, 0.25])


def test_disaggregated_splits_the_rollout_pool_from_the_trainer():
    roles = ledger(_run("disaggregated", STEPS))
    assert set(roles) == {"rollout pool", "trainer"}
    assert list(roles["rollout pool"]["waiting_s"]) == [4.0, 6.0]
    assert list(roles["trainer"]["busy_s"]) == [3.5, 3.0]


def test_overlapping_stages_never_give_negative_waiting():
    steps = STEPS.assign(time_gen_s=[5.0, 20.0, 20.0])
    frame = ledger(_run("colocated", steps))["all devices (colocated)"]
    assert (frame["waiting_s"] == 0).all()


def test_the_table_has_n_and_spread_and_the_models_bubble():
    headers, rows = idle_rows([load_run(RECORD)])
    assert headers == HEADERS and len(rows) == 1
    row = dict(zip(headers, rows[0]))
    assert (
        row["role"] == "all devices (colocated)" and "(n=2)" in row["busy (s)"] and row["model's bubble"].endswith("%")
    )


def _async_run(steps: list[dict]):
    run = _run("disaggregated", STEPS)
    return dataclasses.replace(run, record={**run.record, "async_roles": {"source": "test", "steps": steps}})


def _role_step(step: int, window: float, trainer_busy: float, rollout_busy: float, behind: float) -> dict:
    return {
        "step": step,
        "window_s": window,
        "roles": {
            "trainer": {"busy_s": trainer_busy, "idle_s": window - trainer_busy},
            "rollout": {"busy_s": rollout_busy, "idle_s": window - rollout_busy},
        },
        "staleness": {
            "mean_versions_behind": behind,
            "max_versions_behind": behind,
            "share_behind": 1.0,
            "share_spanning_a_sync": 0.0,
            "n": 32,
        },
    }


def test_an_async_run_is_ledgered_from_its_real_role_spans_not_its_stage_durations():
    """Where run.json has the roles' real spans (async_roles), busy is theirs: generation beside training is
    seen, where stage durations would add up past the step."""
    run = _async_run(
        [_role_step(1, 9.0, 3.0, 6.0, 0), _role_step(2, 4.0, 3.8, 2.0, 1), _role_step(3, 4.0, 3.6, 3.0, 1)]
    )
    roles = ledger(run)
    assert set(roles) == {"rollout pool (spans)", "trainer (spans)"}
    assert list(roles["trainer (spans)"]["step"]) == [2, 3]  # warm-up left out
    assert list(roles["rollout pool (spans)"]["waiting_s"]) == [2.0, 1.0]
    headers, rows = staleness_rows([run])
    row = dict(zip(headers, rows[0]))
    assert row["versions behind, mean ↓"].startswith("1 ± 0 (n=2)")


def test_a_damaged_role_ledger_falls_back_to_the_stage_durations():
    run = _async_run([{"step": "x"}, {"step": 2, "window_s": float("nan"), "roles": {}}, "junk"])
    assert set(ledger(run)) == {"rollout pool", "trainer"}
    assert staleness_rows([run])[1] == []
