"""Time to a quality target (MLPerf Training's time-to-train) from a run's steps. Pure code, no I/O.

A workload's `target` (workloads/spec.py TargetSpec) is reached at the first step where the mean of its
metric over the last `window` steps is at least its value: training reward is noisy step to step, and a
single lucky step is not learning. The run's cost to get there is counted up to the end of that step:

* `seconds`: training time, from the start of the first step to the end of the reached step. Like MLPerf,
  it leaves out start-up (model load, engine start), which a long run amortises;
* `seconds_from_launch`: what a user waits, start-up included (from run.json `launched_unix_s`);
* `steps`, `tokens` (prompt + response tokens of those steps), and with GPUs `gpu_hours` and `energy_j`;
* `cost_usd`: `gpu_hours` at the run's $/GPU-hour (and `energy_j` at $/kWh where one is set), priced by
  `price_target` where rlbench knows a price, else None with `cost_why`.

Only the steps that logged the metric count (`metric_curve`). For `eval_accuracy` those are the held-out
evaluations, logged on the steps where the framework ran one (NaN elsewhere): the target is reached at the
first evaluation where the mean of the last `window` evaluations is at least its value, and `curve` lists
each evaluation's step, accuracy, training seconds and tokens so far.

    reached = time_to_target(steps, {"metric": "reward_mean", "value": 0.4, "window": 3}, launched_unix_s, gpus=0)
    reached["reached"], reached["step"], reached["seconds"]
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlbench.harness.telemetry.costs import energy_kwh


def moving_mean(values: pd.Series, window: int) -> pd.Series:
    """The mean over the last `window` steps at each step (NaN until `window` steps have a value)."""
    return values.rolling(window, min_periods=window).mean()


def metric_curve(ordered: pd.DataFrame, metric: str, window: int) -> pd.Series:
    """The curve a target is judged on, from steps in step order: at each step that logged `metric`, the mean of
    its last `window` logged values (NaN until `window` are in), indexed by `ordered`'s rows. Steps that logged
    nothing count for nothing, so an eval_accuracy target's window counts evaluations, not steps. The one rule
    for time to target, the nightly's convergence band and the report's quality curves."""
    return moving_mean(ordered[metric].astype(float).dropna(), window)


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
    smoothed = metric_curve(ordered, metric, window)
    if metric == "eval_accuracy":
        out["curve"] = _curve(ordered, smoothed.index)
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


def training_seconds(steps: pd.DataFrame) -> pd.Series | None:
    """Seconds from the start of the first step to the end of each step (steps in step order), the one rule for
    time to target and for the curves drawn against time: the stamped step boundaries where the run has them,
    else the running sum of the wall step times; None when a run has neither."""
    start = _first(steps, "step_start_unix_s")
    if start is not None and "step_end_unix_s" in steps and steps["step_end_unix_s"].notna().any():
        return (steps["step_end_unix_s"].astype(float) - start).reset_index(drop=True)
    if "wall_step_time_s" in steps and steps["wall_step_time_s"].notna().any():
        return steps["wall_step_time_s"].astype(float).cumsum().reset_index(drop=True)
    return None


def _cost(upto: pd.DataFrame, launched_unix_s: float | None, gpus: int) -> dict[str, Any]:
    """Seconds, tokens, GPU-hours and energy of the steps up to and including the reached one."""
    end = _last(upto, "step_end_unix_s")
    elapsed = training_seconds(upto)
    seconds = _last(pd.DataFrame({"s": elapsed}), "s") if elapsed is not None else None
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


def price_target(target: dict[str, Any], gpu_hour_usd: float | None, kwh_usd: float) -> dict[str, Any]:
    """`cost_usd` of reaching the target: its GPU-hours at `gpu_hour_usd` plus, where `kwh_usd` is set, its
    measured energy at that price (telemetry.costs' rule, as the record's cost per 1M tokens); None with
    `cost_why` where a run did not reach it, used no GPU, or rlbench knows no price for its GPU."""
    if not target.get("reached"):
        return {"cost_usd": None, "cost_why": "the target was not reached"}
    if target.get("gpu_hours") is None:
        return {"cost_usd": None, "cost_why": "no GPU: rlbench prices GPU-hours only"}
    if gpu_hour_usd is None:
        return {
            "cost_usd": None,
            "cost_why": "no price for this GPU in rlbench's hardware table; set RLBENCH_GPU_HOUR_USD",
        }
    energy_j = target.get("energy_j")
    if kwh_usd and (energy_j is None or not math.isfinite(energy_j)):
        return {"cost_usd": None, "cost_why": "RLBENCH_KWH_USD is set but no energy was measured"}
    energy_usd = energy_kwh(energy_j) * kwh_usd if kwh_usd else 0.0
    return {"cost_usd": target["gpu_hours"] * gpu_hour_usd + energy_usd, "gpu_hour_usd": gpu_hour_usd}
