"""Idle-time ledger: per step, how much of the step each role spent in its timed stages and how much waiting.

One definition for every placement and asynchrony, from the step's wall time (`wall_step_time_s`, else the
framework's timer) and the stages the framework timed:
* colocated (sync or not): one role, the devices (GPUs, or a lane's CPU) every stage shares; busy = the
  sum of the timed stages. A framework that times its update as the rest of the step (TRL) has no waiting.
* disaggregated: the rollout pool, busy = generation; the trainer, busy = every other timed stage
  (log-probs, updates, the weight sync both sides take part in is counted on the trainer's side).
  Where the record has the roles' real call spans (run.json `async_roles`: an asynchronous run), the ledger
  is theirs instead: busy = the union of the role's calls within the trainer's step.
waiting = step - busy, never below zero (where stages add up to more than the step, from overlap or a
poll-late boundary, the role counts as never idle). Beside it the model's bubble for the same step
(run.json `vs_model.bubble`: 1 - the model's work / (devices x measured step)).

    from rlbench.reports.idle_ledger import idle_rows
    headers, rows = idle_rows(runs)
"""

from __future__ import annotations

import math

import pandas as pd

from rlbench.harness.record.schema import STAGES
from rlbench.reports.load import RunView
from rlbench.reports.tables import median_spread

HEADERS = ["run", "role", "busy (s)", "waiting (s)", "waiting share of the step ↓", "model's bubble"]


def _spread(values: pd.Series, digits: int = 3, percent: bool = False) -> str:
    stats = median_spread(values)
    if stats is None:
        return "–"
    median, std, n = stats
    if percent:
        return f"{median:.1%} ± {std:.1%} (n={n})"
    return f"{median:.{digits}g} ± {std:.2g} (n={n})"


def ledger(run: RunView) -> dict[str, pd.DataFrame]:
    """{role: DataFrame(step, busy_s, waiting_s, waiting_share)} over the run's post-warm-up steps: from the
    record's real per-role spans where it has them (`async_roles`), else from the stage durations."""
    from_spans = _ledger_from_spans(run)
    if from_spans:
        return from_spans
    steps = run.steady_steps
    if steps is None or steps.empty:
        return {}
    seconds = (
        steps["wall_step_time_s"]
        if "wall_step_time_s" in steps and steps["wall_step_time_s"].notna().any()
        else steps.get("step_time_s")
    )
    if seconds is None:
        return {}
    timed = {stage: steps[f"time_{stage}_s"].fillna(0.0) for stage in STAGES if f"time_{stage}_s" in steps}
    if not timed:
        return {}
    placement = (run.record.get("parallel") or {}).get("placement", "colocated")
    if placement == "disaggregated":
        roles = {
            "rollout pool": timed.get("gen", pd.Series(0.0, index=steps.index)),
            "trainer": sum((v for k, v in timed.items() if k != "gen"), pd.Series(0.0, index=steps.index)),
        }
    else:
        roles = {"all devices (colocated)": sum(timed.values(), pd.Series(0.0, index=steps.index))}
    out = {}
    for role, busy in roles.items():
        waiting = (seconds - busy).clip(lower=0.0)
        share = (waiting / seconds).where(seconds > 0)
        out[role] = pd.DataFrame({"step": steps["step"], "busy_s": busy, "waiting_s": waiting, "waiting_share": share})
    return out


SPAN_ROLES = {"rollout": "rollout pool (spans)", "trainer": "trainer (spans)"}


def _ledger_from_spans(run: RunView) -> dict[str, pd.DataFrame]:
    """The ledger from run.json's `async_roles` (record/async_roles.py): each role's busy time is the union of
    its real calls in the trainer's step, so overlap between the roles is seen, not assumed."""
    roles = run.record.get("async_roles")
    warmup = run.record.get("workload", {}).get("warmup_steps", 0)
    rows = [r for r in (roles or {}).get("steps", []) if isinstance(r, dict) and _number(r.get("step")) > warmup]
    out = {}
    for role, label in SPAN_ROLES.items():
        frame = []
        for row in rows:
            seconds = (row.get("roles") or {}).get(role) or {}
            busy, idle, window = seconds.get("busy_s"), seconds.get("idle_s"), row.get("window_s")
            if all(isinstance(v, (int, float)) and math.isfinite(v) for v in (busy, idle, window)) and window > 0:
                frame.append({"step": row["step"], "busy_s": busy, "waiting_s": idle, "waiting_share": idle / window})
        if frame:
            out[label] = pd.DataFrame(frame)
    return out


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else -math.inf


def idle_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """The report's table: one row per run and role."""
    rows = []
    for run in runs:
        bubble = (run.record.get("vs_model") or {}).get("bubble")
        bubble_cell = f"{bubble:.1%}" if isinstance(bubble, (int, float)) and math.isfinite(bubble) else "–"
        for role, frame in ledger(run).items():
            rows.append(
                [
                    run.label,
                    role,
                    _spread(frame["busy_s"]),
                    _spread(frame["waiting_s"]),
                    _spread(frame["waiting_share"], percent=True),
                    bubble_cell,
                ]
            )
    return HEADERS, rows


STALENESS_HEADERS = [
    "run",
    "versions behind, mean ↓",
    "versions behind, max ↓",
    "share behind",
    "share spanning a sync",
]


def staleness_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """Per run with real per-role spans (`async_roles`), over its post-warm-up steps (median ± std, n): how many
    policy versions behind the trained responses were, and the share a weight sync interrupted."""
    rows = []
    for run in runs:
        warmup = run.record.get("workload", {}).get("warmup_steps", 0)
        steps = [r for r in (run.record.get("async_roles") or {}).get("steps", []) if isinstance(r, dict)]
        stale = [
            r["staleness"] for r in steps if _number(r.get("step")) > warmup and isinstance(r.get("staleness"), dict)
        ]
        if not stale:
            continue
        column = lambda key: pd.Series([s.get(key) for s in stale], dtype=float)  # noqa: E731
        rows.append(
            [
                run.label,
                _spread(column("mean_versions_behind")),
                _spread(column("max_versions_behind")),
                _spread(column("share_behind"), percent=True),
                _spread(column("share_spanning_a_sync"), percent=True),
            ]
        )
    return STALENESS_HEADERS, rows
