"""Per-role busy/idle and staleness from real call spans (record/async_roles.py), on a hand-built one-step-off
timeline whose answer is known: generation of batch k+1 runs beside training on batch k."""

from __future__ import annotations

import pytest

from rlbench.harness.record.async_roles import Call, role_ledger


def _one_step_off(steps: int = 3, per_step: int = 2, partial: bool = False) -> list[Call]:
    """Batch 1 generated on 0-4 s; then each step k trains 4 s on batch k and syncs 0.5 s, while batch k+1
    (k < steps) generates for 2 s from the update's start."""
    calls = [Call("rollout", "sync", -1.0, -0.5)]  # the sync before step 1: version 0
    calls += [Call("rollout", "response", 0.0, 4.0 - i * 0.1) for i in range(per_step)]
    start = 4.0
    for k in range(1, steps + 1):
        calls.append(Call("trainer", "update", start, start + 4.0))
        calls.append(Call("trainer", "work", start + 4.0, start + 4.5))  # the sync, trainer side
        calls.append(Call("rollout", "sync", start + 4.0, start + 4.5))
        calls.append(Call("rollout", "work", start + 4.0, start + 4.5))  # receiving the weights is rollout work
        if k < steps:
            end = start + (5.0 if partial else 2.0)  # partial: a response runs past the step's sync
            calls += [Call("rollout", "response", start, end - i * 0.1) for i in range(per_step)]
        start += 4.5
    return calls


def test_one_step_off_trains_each_batch_one_version_behind_and_overlaps_the_roles():
    ledger = role_ledger(_one_step_off(), responses_per_step=2, source="test")
    steps = ledger["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert [s["staleness"]["max_versions_behind"] for s in steps] == [0, 1, 1]
    assert steps[1]["staleness"]["share_behind"] == 1.0 and steps[1]["staleness"]["n"] == 2
    second = steps[1]["roles"]
    # Step 2's window: the end of update 1 (8 s) to the end of update 2 (12.5 s): the trainer syncs and trains
    # throughout; the rollout receives the weights (0.5 s) and generates batch 3 (2 s), then waits.
    assert (second["trainer"]["busy_s"], second["trainer"]["idle_s"]) == pytest.approx((4.5, 0.0))
    assert (second["rollout"]["busy_s"], second["rollout"]["idle_s"]) == pytest.approx((2.5, 2.0))
    assert steps[2]["roles"]["rollout"]["busy_s"] == pytest.approx(0.5)  # nothing left to generate: the sync only


def test_a_response_a_sync_interrupts_is_counted_as_spanning_it():
    ledger = role_ledger(_one_step_off(partial=True), responses_per_step=2, source="test")
    assert ledger["steps"][1]["staleness"]["share_spanning_a_sync"] == 1.0


def test_nothing_to_place_the_steps_by_gives_none():
    assert role_ledger([Call("rollout", "response", 0.0, 1.0)], 2, "test") is None
    assert role_ledger([Call("trainer", "update", 0.0, 1.0)], 2, "test") is None


def test_data_parallel_ranks_and_rollout_workers_count_once_per_step_and_version():
    """Two trainer ranks update together and two rollout workers receive each sync: the same steps and
    staleness as one of each."""
    calls = _one_step_off()
    doubled = calls + [Call(c.role, c.kind, c.start_s + 0.01, c.end_s - 0.01) for c in calls if c.kind != "response"]
    one, two = (role_ledger(c, responses_per_step=2, source="test")["steps"] for c in (calls, doubled))
    assert [s["staleness"] for s in two] == [s["staleness"] for s in one]
    assert [s["window_s"] for s in two] == pytest.approx([s["window_s"] for s in one])
