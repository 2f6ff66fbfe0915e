"""Time to a quality target (MLPerf Training's time-to-train) from a run's steps. Pure code, no I/O.

A workload's `target` (workloads/spec.py TargetSpec) is reached at the first step where the mean of its
metric over the last `window` steps is at least its value: training reward is noisy step to step, and a
single lucky step is not learning. The run's cost to get there is counted up to the end of that step:

* `seconds`: training time, from the start of the first step to the end of the reached step. Like MLPerf,
  it leaves out start-up (model load, engine start), which a long run amortises;
* `seconds_from_launch`: what a user waits, start-up included (from run.json `launched_unix_s`);
* `steps`, `tokens` (prompt + response tokens of those steps), and with GPUs `gpu_hours` and `energy_j`.

For `eval_accuracy` the curve is the held-out evaluations, logged on the steps where the framework ran one
(NaN elsewhere): the target is reached at the first evaluation where the mean of the last `window` evaluations
is at least its value, and `curve` lists each evaluation's step, accuracy, training seconds and tokens so far.

    reached = time_to_target(steps, {"metric": "reward_mean", "value": 0.4, "window": 3}, launched_unix_s, gpus=0)
    reached["reached"], reached["step"], reached["seconds"]
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def moving_mean(values: pd.Series, window: int) -> pd.Series:
    """The mean over the last `window` steps at each step (NaN until `window` steps have a value)."""
    return values.rolling(window, min_periods=window).mean()


def time_to_target(
    steps: pd.DataFrame, target: dict[str, Any], launched_unix_s: float | None, gpus: int
) -> dict[str, Any]:
    """run.json `target`: the target, whether and where it was reached, and what reaching it cost."""
    metric, value, window = target["metric"], float(target["value"]), int(target["window"])
    out: dict[str, Any] = {"metric": metric, "value": value, "window": window, "stop": bool(target.get("stop", True))}
    if target.get("eval_every") is not None:
        out.update(eval_every=int(target["eval_every"]), eval_problems=int(target["eval_problems"]))
    if steps.empty or metric not in steps or "step" not in steps:
        return {**out, "reached": False, "steps_run": int(len(steps)), "why": f"no step logged {metric}"}
    ordered = steps.sort_values("step").reset_index(drop=True)
    values = ordered[metric].astype(float)
    if metric == "eval_accuracy":  # only the steps that evaluated; the window counts evaluations
        values = values.dropna()
        out["curve"] = _curve(ordered, values.index)
    smoothed = moving_mean(values, window)
    hits = smoothed.index[smoothed >= value]
    best = smoothed.max()
    out["best_moving_mean"] = None if not math.isfinite(best) else float(best)
    if not len(hits):
        return {**out, "reached": False, "steps_run": int(len(ordered))}
    upto = ordered.iloc[: hits[0] + 1]
    reached_row = upto.iloc[-1]
    out.update(reached=True, step=int(reached_row["step"]), steps_run=int(len(ordered)))
    out.update(_cost(upto, launched_unix_s, gpus))
    return out


def _cost(upto: pd.DataFrame, launched_unix_s: float | None, gpus: int) -> dict[str, Any]:
    """Seconds, tokens, GPU-hours and energy of the steps up to and including the reached one."""
    end = _last(upto, "step_end_unix_s")
    start = _first(upto, "step_start_unix_s")
    seconds = end - start if end is not None and start is not None else _sum(upto, "wall_step_time_s")
    cost: dict[str, Any] = {
        "seconds": seconds,
        "seconds_from_launch": end - launched_unix_s if end is not None and launched_unix_s else None,
        "tokens": _sum(upto, "total_tokens"),
    }
    if gpus and seconds is not None:
        cost["gpu_hours"] = gpus * seconds / 3600
        cost["energy_j"] = _sum(upto, "energy_j")
    return cost


def _curve(ordered: pd.DataFrame, evaluated: pd.Index) -> list[dict[str, Any]]:
    """Each evaluation: its step, accuracy, and the training seconds and tokens up to the end of that step."""
    return [
        {"step": int(ordered.at[i, "step"]), "eval_accuracy": float(ordered.at[i, "eval_accuracy"])}
        | {k: v for k, v in _cost(ordered.iloc[: i + 1], None, 0).items() if k in ("seconds", "tokens")}
        for i in evaluated
    ]


def _first(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.iloc[0]) if len(values) else None


def _last(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.iloc[-1]) if len(values) else None


def _sum(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame or frame[column].isna().all():
        return None
    return float(frame[column].sum())
