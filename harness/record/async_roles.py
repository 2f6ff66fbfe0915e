"""Per role and per step, from a run's real call spans: how long the trainer and the rollout pool were busy and
idle, and how many policy versions behind the responses each step trained on were (staleness).

For runs whose rollout has GPUs of its own (placement=disaggregated, the asynchronous trainers), where stage
durations cannot say who waited: generation of one step runs beside another step's training. An adapter turns
its framework's trace into `Call`s; this module is framework-neutral:
* the trainer's step k is its k-th update (its data-parallel ranks' concurrent calls are one); its window runs
  from the end of update k-1 (for k = 1, from the first response's start) to the end of update k. A role is busy
  for the union of its calls in the window.
* a policy version is a weight sync that reached the rollout side: the rollout's weights are at version v once
  v syncs after the first update have ended (the sync before step 1 is version 0; the rollout workers'
  concurrent receipts of one sync are one). The trainer's step k trains
  on version k-1's policy.
* step k trains the k-th run of `responses_per_step` responses, by the order they ended (the order the
  frameworks' queues hand them over: first finished, first trained). A response started on version v is
  k-1-v versions behind; one whose generation a sync interrupted (partial rollout) is counted as spanning it.

    from rlbench.harness.record.async_roles import Call, role_ledger
    ledger = role_ledger(calls, responses_per_step=32, source="Ray timeline")
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["update", "sync", "response", "work"]
ROLES = ("trainer", "rollout")


@dataclass(frozen=True)
class Call:
    """One call of a role: `update` (the trainer's policy update, one per step), `sync` (a weight sync's end on
    the rollout side), `response` (one response generated), `work` (any other busy call of the role)."""

    role: Literal["trainer", "rollout"]
    kind: Kind
    start_s: float
    end_s: float


def _merged(calls: list[Call]) -> list[Call]:
    """One call per overlapping run of calls: the trainer's data-parallel ranks update together, and every
    rollout worker receives the same sync, so concurrent calls are one step's update, one version's sync."""
    merged: list[Call] = []
    for call in sorted(calls, key=lambda c: c.start_s):
        if merged and call.start_s <= merged[-1].end_s:
            last = merged[-1]
            merged[-1] = Call(last.role, last.kind, last.start_s, max(last.end_s, call.end_s))
        else:
            merged.append(call)
    return merged


def _union_within(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by the union of `intervals`."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    covered, reach = 0.0, lo
    for a, b in clipped:
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered


def role_ledger(
    calls: list[Call], responses_per_step: int, source: str, steps_recorded: int | None = None
) -> dict[str, Any] | None:
    """{source, rule, steps: [{step, window_s, roles: {role: {busy_s, idle_s}}, staleness}]}; None without
    a trainer update or a response (nothing to place the steps by). `steps_recorded`: the steps the record
    holds (a trainer may run more than it logs); later ones are left out."""
    updates = _merged([c for c in calls if c.kind == "update"])
    responses = sorted((c for c in calls if c.kind == "response"), key=lambda c: c.end_s)
    if not updates or not responses or responses_per_step < 1:
        return None
    # Versions: syncs that ended after the first update (the one before step 1 leaves version 0).
    syncs = [c.end_s for c in _merged([c for c in calls if c.kind == "sync"]) if c.end_s > updates[0].start_s]
    busy = {role: [(c.start_s, c.end_s) for c in calls if c.role == role and c.kind != "sync"] for role in ROLES}
    steps = []
    for k, update in enumerate(updates[:steps_recorded], start=1):
        lo = updates[k - 2].end_s if k > 1 else min(r.start_s for r in responses)
        hi = update.end_s
        window = hi - lo
        roles = {}
        for role in ROLES:
            seconds = _union_within(busy[role], lo, hi)
            roles[role] = {"busy_s": seconds, "idle_s": max(window - seconds, 0.0)}
        trained = responses[(k - 1) * responses_per_step : k * responses_per_step]
        behind = [k - 1 - bisect.bisect_right(syncs, r.start_s) for r in trained]
        spanning = [bisect.bisect_right(syncs, r.end_s) != bisect.bisect_right(syncs, r.start_s) for r in trained]
        staleness = (
            {
                "mean_versions_behind": statistics.fmean(behind),
                "max_versions_behind": max(behind),
                "share_behind": sum(b > 0 for b in behind) / len(behind),
                "share_spanning_a_sync": sum(spanning) / len(spanning),
                "n": len(behind),
            }
            if behind
            else None
        )
        steps.append({"step": k, "window_s": window, "roles": roles, "staleness": staleness})
    return {
        "source": source,
        "rule": "the trainer's k-th update ends step k; busy = union of the role's calls in the step; responses "
        "trained in the order they ended; versions behind = k-1 minus the weight syncs ended before the "
        "response started",
        "steps": steps,
    }
