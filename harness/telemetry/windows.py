"""Step windows: check a steps table and find which step each timestamp falls in.

Shared by the telemetry alignment and the NCCL summary. Steps are wall-clock
windows `[step_start_unix_s, step_end_unix_s]`, sorted and not overlapping (an RL
step's phases are sequential); a time in no window belongs to no step.

    python -c "import numpy as np, pandas as pd; from rlbench.harness.telemetry.windows import assign_steps; \\
        print(assign_steps(np.array([0.5, 1.5, 9.0]), pd.DataFrame({'step': [1, 2], \\
        'step_start_unix_s': [0.0, 1.0], 'step_end_unix_s': [1.0, 2.0]})))"   # [0 1 -1]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STEP_COLUMNS = ("step", "step_start_unix_s", "step_end_unix_s")
_OVERLAP_TOLERANCE_S = 1e-6  # float noise where one step's end is the next one's start


def check_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps sorted by start; ValueError naming the problem when they are not usable windows."""
    missing = [column for column in STEP_COLUMNS if column not in steps.columns]
    if missing:
        raise ValueError(f"steps table lacks column(s) {missing}; it needs {list(STEP_COLUMNS)}")
    ordered = steps.loc[:, list(STEP_COLUMNS)].sort_values("step_start_unix_s", kind="stable").reset_index(drop=True)
    start = ordered["step_start_unix_s"].to_numpy(float)
    end = ordered["step_end_unix_s"].to_numpy(float)
    bad = ~np.isfinite(start) | ~np.isfinite(end) | (end < start)
    if bad.any():
        raise ValueError(
            f"step {ordered['step'][bad.argmax()]}: step_end_unix_s must be finite and >= step_start_unix_s"
        )
    overlap = start[1:] < end[:-1] - _OVERLAP_TOLERANCE_S
    if overlap.any():
        raise ValueError(
            f"step {ordered['step'][overlap.argmax() + 1]} starts before the previous step ends; "
            f"per-step telemetry needs non-overlapping step windows"
        )
    return ordered


def assign_steps(times: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Row index into `check_steps(steps)` for each time, -1 where a time is in no step.

    Windows include both ends; a time on the boundary shared by two steps goes to the later one.
    """
    ordered = check_steps(steps)
    start = ordered["step_start_unix_s"].to_numpy(float)
    end = ordered["step_end_unix_s"].to_numpy(float)
    times = np.asarray(times, dtype=float)
    index = np.searchsorted(start, times, side="right") - 1
    inside = (index >= 0) & (times <= end[np.clip(index, 0, None)]) if len(start) else np.zeros(len(times), bool)
    return np.where(inside, index, -1)
