"""One step-time definition for every framework: the gap between consecutive step-end stamps.

Frameworks time a step differently (verl's timer leaves out metric computation,
OpenRLHF sync sums its stages, TRL times the optimizer step), so the record also
carries `wall_step_time_s`: the wall-clock time between the moments consecutive
steps' metrics were logged, taken the same way for every framework:
- where the framework's log stamps each step with the writer's wall clock, that
  stamp (`step_end_unix_s`): TRL's line, written by rlbench's callback as the step
  is logged; OpenRLHF's TensorBoard events, stamped at `add_scalar` (their arrival
  on disk follows TensorBoard's batched flushes, so arrival would be wrong there);
- where it logs no wall clock (verl), the moment rlbench's progress poll (every
  POLL_S) first saw the step's line; verl writes its file unbuffered, so this is the
  logging moment to within the poll interval. These stamps also stand in for verl's
  missing step boundaries (end = the stamp, start = end - the framework's step
  time), so telemetry can still be aligned to steps; the record says when they did.
`step_seen_unix_s` (the arrival stamp) is kept for every framework.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pandas as pd

STAMPS_FILE = "step_stamps.jsonl"


def note_seen(run_dir: Path, steps: list[int], now: float | None = None) -> None:
    """Append the stamp of steps seen for the first time; a stamp that cannot be written is only lost."""
    if not steps:
        return
    now = time.time() if now is None else now
    try:
        with (run_dir / STAMPS_FILE).open("a") as out:
            out.writelines(json.dumps({"step": int(step), "seen_unix_s": now}) + "\n" for step in steps)
    except OSError:
        pass  # a full disk is reported by the record itself; the stamps are an addition to it


def read_stamps(run_dir: Path) -> dict[int, float]:
    stamps: dict[int, float] = {}
    path = run_dir / STAMPS_FILE
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        try:
            entry = json.loads(line)
            stamps.setdefault(int(entry["step"]), float(entry["seen_unix_s"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash or a full disk
    return stamps


def apply_stamps(steps: pd.DataFrame, run_dir: Path) -> tuple[pd.DataFrame, str | None]:
    """Add step_seen_unix_s and wall_step_time_s; fill missing step boundaries from the stamps (and say so)."""
    if steps.empty:
        return steps, None
    stamps = read_stamps(run_dir)
    steps = steps.copy()
    steps["step_seen_unix_s"] = [stamps.get(int(step), math.nan) for step in steps["step"]]
    missing = "step_end_unix_s" not in steps or steps["step_end_unix_s"].isna().all()
    note = None
    if missing and not steps["step_seen_unix_s"].isna().all():
        steps["step_end_unix_s"] = steps["step_seen_unix_s"]
        # The poll sees a line up to POLL_S late, and two lines seen by one poll share its stamp, so end - step
        # time can fall before the previous step's end; steps run one after the other, so such a start is moved
        # to that end (the window loses at most the poll's lag of its step) and telemetry aligns to every step.
        previous_end = steps["step_end_unix_s"].shift(1)
        # a held-out evaluation between the framework's step timer and its log (verl) is part of the step's window
        evaluation = steps["time_eval_s"].fillna(0.0) if "time_eval_s" in steps else 0.0
        starts = steps["step_seen_unix_s"] - steps["step_time_s"] - evaluation
        steps["step_start_unix_s"] = starts.where(~(starts < previous_end), previous_end)
        note = (
            "the framework logged no step boundaries: rlbench's arrival stamps of its metrics lines stand "
            "in for them (end = when the line appeared, start = end - its step time, or the previous step's end "
            "where the poll's lag put it before that), and wall_step_time_s is the gap between them"
        )
    ends = steps["step_end_unix_s"] if "step_end_unix_s" in steps else pd.Series(math.nan, index=steps.index)
    steps["wall_step_time_s"] = ends.diff()
    return steps, note
