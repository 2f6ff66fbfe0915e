"""Per-step telemetry: energy, power, utilisation and memory of each RL step.

Pure: takes the recorded `telemetry.parquet` table (columns in
`rlbench.harness.telemetry.columns`; several hosts may be concatenated) and the steps
table (`step`, `step_start_unix_s`, `step_end_unix_s`) and returns one row per step.
A sampler is a (node, host) pair: on a Ray cluster several nodes may share a host,
and a table without a `node` column is all `columns.LOCAL_NODE`.

Energy of a step, per GPU: the cumulative NVML energy counter, linearly
interpolated at the step's start and end, differenced. Where a GPU has no counter,
its power samples are linearly interpolated and integrated exactly (trapezoid, with
the partial intervals at both ends). A GPU whose samples do not cover the whole
step gives NaN rather than an extrapolated guess, and the step's energy (the sum
over all GPUs of all samplers) is then NaN too. No GPU rows: NaN.

    python -c "import pandas as pd; from rlbench.harness.telemetry.align import per_step_telemetry; \\
        print(per_step_telemetry(pd.read_parquet('runs/x/telemetry.parquet'), pd.read_parquet('runs/x/steps.parquet')))"
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rlbench.harness.telemetry.columns import NAMES
from rlbench.harness.telemetry.nodes import with_node
from rlbench.harness.telemetry.windows import assign_steps, check_steps

REQUIRED_COLUMNS = ("time_unix_s", "host", "source", "device")
# One sampler's rows: a node alone may not be unique (one-node tables of several hosts are all "local"), a host
# alone is not either (two Ray nodes of a loopback cluster share one).
SAMPLER = ["node", "host"]

OUTPUT_COLUMNS = (
    "step",
    "samples",
    "energy_j",
    "energy_method",
    "power_mean_w",
    "gpu_util_mean_pct",
    "gpu_mem_peak_gb",
    "cpu_util_mean_pct",
    "proc_cpu_util_mean_pct",
    "proc_rss_peak_gb",
    "proc_pss_peak_gb",
)


def energy_from_power(times: np.ndarray, power: np.ndarray) -> float:
    """Energy in J from power samples in W at times in s (trapezoid rule; NaN samples dropped)."""
    t, p = _finite_series(times, power)
    if len(t) < 2:
        return float("nan") if len(t) == 0 else 0.0
    return float(np.sum((p[1:] + p[:-1]) / 2 * np.diff(t)))


def _finite_series(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted by time, NaN values and repeated times dropped (np.interp needs increasing times)."""
    t, v = np.asarray(times, float), np.asarray(values, float)
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    unique = np.concatenate([[True], np.diff(t) > 0]) if len(t) else np.zeros(0, bool)
    return t[unique], v[unique]


def _power_integral_at(t: np.ndarray, p: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Integral of the linearly interpolated power from t[0] to each query time (J); queries in [t0, tn]."""
    cumulative = np.concatenate([[0.0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(t))])
    i = np.clip(np.searchsorted(t, query, side="right") - 1, 0, len(t) - 2)
    dt = query - t[i]
    slope = (p[i + 1] - p[i]) / (t[i + 1] - t[i])
    return cumulative[i] + p[i] * dt + slope * dt * dt / 2


def _device_energy(gpu: pd.DataFrame, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, str]:
    """(energy per step in J, method) for one GPU's rows."""
    times = gpu["time_unix_s"].to_numpy(float)
    for method, column in (("counter", "energy_j"), ("power", "power_w")):
        t, v = _finite_series(times, gpu[column].to_numpy(float))
        if len(t) < 2:
            continue
        if method == "counter":
            energy = np.interp(end, t, v) - np.interp(start, t, v)
            energy[energy < 0] = np.nan  # the counter restarts when the driver reloads
        else:
            energy = _power_integral_at(t, v, end) - _power_integral_at(t, v, start)
        covered = (start >= t[0]) & (end <= t[-1])
        return np.where(covered, energy, np.nan), method
    return np.full(len(start), np.nan), "none"


def _energy(gpu: pd.DataFrame, steps: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    start = steps["step_start_unix_s"].to_numpy(float)
    end = steps["step_end_unix_s"].to_numpy(float)
    if gpu.empty:
        return np.full(len(steps), np.nan), ["none"] * len(steps)
    per_device = [_device_energy(rows, start, end) for _, rows in gpu.groupby([*SAMPLER, "device"], sort=True)]
    methods = {method for _, method in per_device}
    method = methods.pop() if len(methods) == 1 else "mixed"
    return np.sum([energy for energy, _ in per_device], axis=0), [method] * len(steps)


def _host_columns(host: pd.DataFrame, index: pd.RangeIndex) -> dict[str, np.ndarray]:
    """The host-row outputs per step. Host-wide readings (system CPU) repeat for every node sampled on one
    physical host, so they are grouped by host; the process-tree ones differ per node, so by sampler."""

    def per_step(series: pd.Series) -> np.ndarray:
        return series.reindex(index).to_numpy(float)

    by_host = host.groupby(["_step", "host"])["cpu_util_pct"].mean()
    by_sampler = host.groupby(["_step", *SAMPLER])
    return {
        "cpu_util_mean_pct": per_step(by_host.groupby(level="_step").mean()),
        "proc_cpu_util_mean_pct": per_step(
            by_sampler["proc_cpu_util_pct"].mean().groupby(level="_step").sum(min_count=1)
        ),
        # peaks of different samplers fall at different moments: their sum would claim a moment that never was
        "proc_rss_peak_gb": per_step(by_sampler["proc_rss_gb"].max().groupby(level="_step").max()),
        "proc_pss_peak_gb": per_step(by_sampler["proc_pss_gb"].max().groupby(level="_step").max()),
    }


def per_step_telemetry(telemetry: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """One row per step; see OUTPUT_COLUMNS and the module docstring for each value's meaning.

    A sampler is one node on one host (`node`, `host`). samples: telemetry rows
    (host and GPU, all samplers) inside the step. power_mean_w: mean board power
    summed over all GPUs (node, host, device). gpu_util_mean_pct: mean over GPUs
    and samples. gpu_mem_peak_gb: largest single-GPU memory in use.
    cpu_util_mean_pct: system CPU, mean over distinct physical hosts (a host's
    reading repeats in the rows of every node sampled on it, and counts once).
    proc_cpu_util_mean_pct: the process tree's CPU in % of one core, each
    sampler's mean summed over samplers. proc_rss_peak_gb: the largest of each
    sampler's peak RSS (max over samplers, not a sum); proc_pss_peak_gb the same of
    PSS (read once a second: NaN for a step without a reading). A step shorter than the
    sampling interval may hold no samples: its means are NaN, while its energy
    (interpolated) is still defined.
    """
    ordered = check_steps(steps)
    missing = [column for column in REQUIRED_COLUMNS if column not in telemetry.columns]
    if missing:
        raise ValueError(f"telemetry table lacks column(s) {missing}")
    # a reading nobody recorded (a table from elsewhere, an older sampler) is simply empty
    telemetry = with_node(telemetry.assign(**{name: np.nan for name in NAMES if name not in telemetry.columns}))
    where = assign_steps(telemetry["time_unix_s"].to_numpy(float), ordered)
    inside = telemetry.assign(_step=where)[where >= 0]
    host, gpu = inside[inside["source"] == "host"], inside[inside["source"] == "gpu"]
    index = pd.RangeIndex(len(ordered))

    def per_step(series: pd.Series) -> np.ndarray:
        return series.reindex(index).to_numpy(float)

    energy, method = _energy(telemetry[telemetry["source"] == "gpu"], ordered)
    by_device = gpu.groupby(["_step", *SAMPLER, "device"])["power_w"].mean()
    table = pd.DataFrame(
        {
            "step": ordered["step"].to_numpy(),
            "samples": inside.groupby("_step").size().reindex(index, fill_value=0).to_numpy(int),
            "energy_j": energy,
            "energy_method": method,
            "power_mean_w": per_step(by_device.groupby(level="_step").sum(min_count=1)),
            "gpu_util_mean_pct": per_step(gpu.groupby("_step")["gpu_util_pct"].mean()),
            "gpu_mem_peak_gb": per_step(gpu.groupby("_step")["mem_used_gb"].max()),
            **_host_columns(host, index),
        }
    )
    return table.loc[:, list(OUTPUT_COLUMNS)]
