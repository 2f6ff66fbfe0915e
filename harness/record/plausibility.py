"""Figures no run can produce: a record's per-step values checked against what its machines could do.

A sampler or a formula that goes wrong shows up as a number beyond a physical limit: the framework's CPU above
every core of the hosts busy (100 % x logical cores), its memory above the hosts' memory, an MFU outside 0-1.
Such a value is a data error of the record (run.json `data_errors`, one line each), named in the report's
measurement hygiene, never a figure to compare.

    python -c "from rlbench.harness.record.read import read_record; \
        from rlbench.harness.record.plausibility import data_errors; r = read_record('runs/x'); \
        print(data_errors(r, r['steps']))"
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlbench.harness.perfmodel import find_hardware
from rlbench.harness.record.schema import STAGES


def _machines(record: dict[str, Any]) -> list[dict[str, Any]]:
    """(cpu_count, memory_gb) of every machine the run's samplers read: the cluster's distinct machines, or this
    host's environment."""
    cluster = record.get("cluster") or {}
    seen: dict[str, dict[str, Any]] = {}
    for node in cluster.get("nodes") or []:
        if isinstance(node, dict) and node.get("cpu_count"):
            seen.setdefault(node.get("machine") or node.get("label"), node)
    if seen:
        return list(seen.values())
    environment = record.get("environment") or {}
    return [environment] if environment.get("cpu_count") else []


def _worst(steps: pd.DataFrame, column: str, above: float) -> tuple[int, float] | None:
    """(step, value) of the largest finite value above `above` in `column`, or None."""
    if column not in steps or "step" not in steps:
        return None
    values = pd.to_numeric(steps[column], errors="coerce")
    over = values[values > above]
    if over.empty:
        return None
    index = over.idxmax()
    return int(steps.loc[index, "step"]), float(over.max())


def data_errors(record: dict[str, Any], steps: pd.DataFrame) -> list[str]:
    """One line per impossible figure of the record's steps (empty when every figure is possible)."""
    errors: list[str] = []
    machines = _machines(record)
    cores = sum(int(m["cpu_count"]) for m in machines)
    if cores and (worst := _worst(steps, "proc_cpu_util_mean_pct", 100.0 * cores)):
        errors.append(
            f"step {worst[0]}: framework CPU {worst[1]:.0f}% of one core, above the {cores} logical cores' "
            f"{100 * cores}%"
        )
    memory = max((float(m.get("memory_gb") or 0) for m in machines), default=0.0)
    # PSS only: summed RSS counts a shared page once per process and may exceed the host (that is why PSS is read).
    if memory and (worst := _worst(steps, "proc_pss_peak_gb", memory)):
        errors.append(f"step {worst[0]}: framework PSS {worst[1]:.3g} GB, above the host's {memory:.3g} GB")
    for column in ("mfu", "framework_mfu"):
        if worst := _worst(steps, column, 1.0):
            errors.append(f"step {worst[0]}: {column} {worst[1]:.3g}, above 1 (the device's peak)")
        if column in steps and (pd.to_numeric(steps[column], errors="coerce") < 0).any():
            errors.append(f"{column} below 0")
    errors += _power_errors(record, steps) + _stage_sum_errors(record, steps)
    for column in [c for c in steps.columns if c.endswith("_s") and c.startswith(("time_", "step_time"))]:
        values = pd.to_numeric(steps[column], errors="coerce")
        if (values < 0).any() or values.map(lambda v: isinstance(v, float) and math.isinf(v)).any():
            errors.append(f"{column}: a negative or infinite time")
    return errors


# Board power may overshoot the rated maximum briefly (NVML's average over its own window); beyond this it is a
# reading of something else (another GPU's counter, a unit error).
POWER_MARGIN = 1.10
# Stages timed one after the other may add up to a little more than the step (each timer's own start and stop).
STAGE_SUM_MARGIN, STAGE_SUM_SLACK_S = 1.05, 0.05


def _power_errors(record: dict[str, Any], steps: pd.DataFrame) -> list[str]:
    """Mean board power above the GPUs' rated maximum (the cited hardware table's TDP) by more than POWER_MARGIN."""
    gpus = (record.get("environment") or {}).get("gpus") or []
    row = find_hardware(gpus[0].get("name", "")) if gpus and isinstance(gpus[0], dict) else None
    if row is None or not row.tdp_w:
        return []
    limit = row.tdp_w * len(gpus) * POWER_MARGIN
    worst = _worst(steps, "power_mean_w", limit)
    if worst is None:
        return []
    return [f"step {worst[0]}: board power {worst[1]:.0f} W, above {len(gpus)} x {row.tdp_w:g} W ({row.name}'s TDP)"]


def _stage_sum_errors(record: dict[str, Any], steps: pd.DataFrame) -> list[str]:
    """Stages that run one after the other adding up to more than their step. An asynchronous run overlaps
    generation with training by design, so there the sum says nothing."""
    if str((record.get("parallel") or {}).get("async", "off")) not in ("off", "0") or "step_time_s" not in steps:
        return []
    columns = [f"time_{stage}_s" for stage in STAGES if f"time_{stage}_s" in steps]
    if not columns:
        return []
    total = steps[columns].apply(pd.to_numeric, errors="coerce").fillna(0.0).sum(axis=1)
    step = pd.to_numeric(steps["step_time_s"], errors="coerce")
    over = total > step * STAGE_SUM_MARGIN + STAGE_SUM_SLACK_S
    if not over.any():
        return []
    index = (total - step)[over].idxmax()
    return [
        f"step {int(steps.loc[index, 'step'])}: its stages add up to {total[index]:.3g} s, more than its "
        f"{step[index]:.3g} s step"
    ]
