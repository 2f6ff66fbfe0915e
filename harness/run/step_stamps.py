"""Step-end stamps rlbench takes itself: when each step's metrics line appeared, the same way for every framework.

Frameworks time a step differently (verl's timer leaves out metric computation,
OpenRLHF sync sums its stages, TRL times the optimizer step), and verl logs no
wall clock at all. While the framework runs, the runner's progress poll (every
POLL_S) notes the wall time at which it first sees each step in the metrics file;
the record then carries
- `step_seen_unix_s`: that stamp (resolution: the poll interval),
- `wall_step_time_s`: the time between consecutive stamps, one definition of step
  time for every framework, beside the framework's own `step_time_s`;
and where a framework logged no step boundaries (verl), the stamps stand in for
them (`step_end_unix_s` = the stamp, start = end - the framework's step time), so
telemetry can still be aligned to steps. The record says when it did.
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
    steps["wall_step_time_s"] = steps["step_seen_unix_s"].diff()
    missing = "step_end_unix_s" not in steps or steps["step_end_unix_s"].isna().all()
    if not missing or steps["step_seen_unix_s"].isna().all():
        return steps, None
    steps["step_end_unix_s"] = steps["step_seen_unix_s"]
    steps["step_start_unix_s"] = steps["step_seen_unix_s"] - steps["step_time_s"]
    return steps, (
        "the framework logged no step boundaries: rlbench's arrival stamps of its metrics lines stand "
        "in for them (end = when the line appeared, start = end - its step time)"
    )
