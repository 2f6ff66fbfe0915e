"""The runner's side of the profiler pipeline: telemetry, NCCL logs, energy and cost per token.

Every run gets rlbench's own system measurements, taken outside the framework:
a sampler process (host always, NVML GPUs where present) writes
`telemetry.parquet`; its samples are aligned to the framework's step boundaries
for per-step energy and utilisation. With `RLBENCH_NCCL_LOG=1` NCCL logs its
collectives, parsed into `comm.parquet` (counts and bytes per op and step).
Cost per 1M tokens = GPU-hours x $/GPU-hour (`RLBENCH_GPU_HOUR_USD`, else the
hardware table's cited default) + energy x `RLBENCH_KWH_USD` (default 0).

    RLBENCH_NCCL_LOG=1 rlbench run --framework verl --workload gsm8k-grpo
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlbench.harness import settings
from rlbench.harness.atomic import replacing
from rlbench.harness.record.read import PARQUET_ERRORS, first_line
from rlbench.harness.settings import sample_hz
from rlbench.harness.telemetry import (
    cost_per_mtok_usd,
    energy_per_mtok_j,
    idle_nodes,
    nccl_env,
    per_node_summary,
    per_step_telemetry,
    read_nccl_logs,
    start_sampler,
    summarize_collectives,
)
from rlbench.harness.telemetry.columns import DRIVER_NODE, LOCAL_NODE
from rlbench.harness.telemetry.nodes import nodes_of
from rlbench.harness.telemetry.sampler import SamplerHandle

TELEMETRY_FILE, COMM_FILE, NCCL_PREFIX = "telemetry.parquet", "comm.parquet", "nccl"
# per_step_telemetry column -> steps.parquet column
STEP_COLUMNS = {
    "energy_j": "energy_j",
    "power_mean_w": "power_mean_w",
    "gpu_util_mean_pct": "gpu_util_mean_pct",
    "cpu_util_mean_pct": "cpu_util_mean_pct",
    "proc_cpu_util_mean_pct": "proc_cpu_util_mean_pct",
    "proc_rss_peak_gb": "proc_rss_peak_gb",
    "proc_pss_peak_gb": "proc_pss_peak_gb",
}


def nccl_logging_enabled() -> bool:
    return settings.nccl_log()


def framework_env(run_dir: Path) -> dict[str, str]:
    return nccl_env(nccl_logging_enabled(), run_dir / NCCL_PREFIX)


def start(run_dir: Path, pid: int, on_cluster: bool = False, gpus: bool = True) -> SamplerHandle | None:
    """The sampler around the framework process, or None when RLBENCH_SAMPLE_HZ=0. On a Ray cluster it samples
    the driver's process tree only, as node `driver`: the node agents read every node's host and GPUs. `gpus`:
    whether this host has any (the default rate follows, settings.sample_hz)."""
    rate = sample_hz(gpus)
    if rate <= 0:
        return None
    cluster = {"node": DRIVER_NODE, "devices": []} if on_cluster else {}
    # stop_orphan: should rlbench itself be SIGKILLed, the sampler stops the framework it leaves behind.
    return start_sampler(run_dir / TELEMETRY_FILE, root_pid=pid, rate_hz=rate, stop_orphan=True, **cluster)


def add_telemetry(run_dir: Path, handle: SamplerHandle | None, steps: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Stop the sampler and join its per-step view onto the steps table; returns (steps, notes).

    On a multi-node run the notes also hold `nodes` (per_node_summary, one dict a node) and `idle_nodes`,
    aligned steps or not. A telemetry file that does not read leaves the steps as they are, with an `error`."""
    path = handle.stop() if handle is not None else None
    notes = handle.notes() if handle is not None else {"disabled": "RLBENCH_SAMPLE_HZ=0"}
    if path is None:
        return steps, notes
    try:
        telemetry = pd.read_parquet(path)
    except PARQUET_ERRORS as exc:  # e.g. the sampler was killed mid-write: the run's record still matters
        return steps, {**notes, "error": f"{TELEMETRY_FILE}: {type(exc).__name__}: {first_line(exc)}"}
    notes = {**notes, **node_notes(telemetry), **framework_cpu(telemetry)}
    if steps.empty or "step_start_unix_s" not in steps:
        return steps, notes
    bounds = steps[["step_start_unix_s", "step_end_unix_s"]]
    if bounds.isna().any().any():  # e.g. verl logs no wall-clock step times: keep the run-level samples only
        return steps, {**notes, "aligned": False, "why": "the framework logged no wall-clock step boundaries"}
    try:
        per_step = per_step_telemetry(telemetry, steps[["step", "step_start_unix_s", "step_end_unix_s"]])
    except ValueError as exc:  # unusable step windows: the run-level samples and per-node summary are kept
        return steps, {**notes, "aligned": False, "error": f"ValueError: {exc}"}
    joined = steps.merge(per_step[["step", *STEP_COLUMNS]].rename(columns=STEP_COLUMNS), on="step", how="left")
    return joined, notes


def framework_cpu(telemetry: pd.DataFrame) -> dict[str, float]:
    """{"framework_cpu_s": CPU seconds of the framework's process tree over the samples} (this host's rows; the
    mean reading times the span sampled), the denominator of rlbench's own CPU share; {} without readings."""
    host = telemetry[(telemetry["source"] == "host") & (telemetry.get("node", LOCAL_NODE) == LOCAL_NODE)]
    readings = host["proc_cpu_util_pct"].dropna() if "proc_cpu_util_pct" in host else pd.Series(dtype=float)
    if len(readings) < 2:
        return {}
    span = float(host["time_unix_s"].max() - host["time_unix_s"].min())
    return {"framework_cpu_s": float(readings.mean()) / 100 * span}


def node_notes(telemetry: pd.DataFrame) -> dict[str, Any]:
    """{"nodes": [...], "idle_nodes": [...]} for run.json when the table holds several nodes, else {}."""
    try:
        if len(set(nodes_of(telemetry)) - {LOCAL_NODE}) < 2:
            return {}
        summary = per_node_summary(telemetry)
        records = [{key: _json_value(value) for key, value in row.items()} for row in summary.to_dict("records")]
        idle = [{key: _json_value(value) for key, value in flag.items()} for flag in idle_nodes(summary)]
    except (KeyError, TypeError, ValueError) as exc:  # a table it cannot read must not cost the step alignment
        return {"nodes_error": f"{type(exc).__name__}: {first_line(exc)}"}
    return {"nodes": records, "idle_nodes": idle}


def _json_value(value: Any) -> Any:
    """A plain JSON value: numpy scalars as Python numbers, NaN and missing as None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def add_comm(run_dir: Path, steps: pd.DataFrame) -> dict[str, Any] | None:
    """Parse NCCL's logs (if it wrote any) into comm.parquet; returns per-op totals for run.json."""
    if not nccl_logging_enabled():
        return None
    table = read_nccl_logs(run_dir / NCCL_PREFIX)
    if table.empty:
        return {"calls": 0, "note": "NCCL logged no collectives (no NCCL communicator was used)"}
    bounds = steps[["step", "step_start_unix_s", "step_end_unix_s"]] if not steps.empty else None
    try:
        summary = summarize_collectives(table, bounds, by=("step", "op", "scope")) if bounds is not None else None
    except ValueError:  # NCCL older than 2.26 logs no timestamps: totals only
        summary = None
    if summary is None:
        summary = summarize_collectives(table, by=("op", "scope"))
    with replacing(run_dir / COMM_FILE) as tmp:
        summary.to_parquet(tmp, index=False)
    # Every node's logs are here (on a cluster the node agents bring them back): hosts and scopes tell them apart.
    scopes = {scope: int(n) for scope, n in table["scope"].value_counts().items()}
    return {"calls": int(len(table)), "hosts": int(table["host"].nunique()), "calls_by_scope": scopes}


def costs(summary: dict[str, Any], steps: pd.DataFrame, gpus: int, hardware_usd: float | None) -> dict[str, Any]:
    """Energy and cost per 1M tokens over post-warm-up steps; None where an input is unknown."""
    tokens = summary.get("total_tokens", {}).get("mean")
    step_s = summary.get("step_time_s", {}).get("mean")
    energy = summary.get("energy_j", {}).get("mean")
    price, kwh_usd = settings.gpu_hour_usd(hardware_usd), settings.kwh_usd()
    out: dict[str, Any] = {
        "gpu_hour_usd": price,
        "kwh_usd": kwh_usd,
        "energy_per_mtok_j": None,
        "cost_per_mtok_usd": None,
    }
    if tokens and energy is not None and math.isfinite(energy):
        out["energy_per_mtok_j"] = energy_per_mtok_j(energy, tokens)
    if tokens and step_s and gpus and price is not None:
        energy_j = energy if energy is not None and math.isfinite(energy) else 0.0
        out["cost_per_mtok_usd"] = cost_per_mtok_usd(
            gpus * step_s / 3600, price, energy_j, kwh_usd if energy_j else 0.0, tokens
        )
    return out


def profile_record(run_dir: Path, request: Any, steps: pd.DataFrame, warmup_steps: int) -> dict[str, Any]:
    """run.json `profile`: the request, the trace files it left under profile/, and its overhead: the median
    framework step time of the profiled steps over that of the other post-warm-up steps (the step after the
    window also pays the trace's export, so it is left out of both)."""
    from rlbench.harness.spec.profile import PROFILE_DIR

    folder = run_dir / PROFILE_DIR
    files = sorted(str(p.relative_to(run_dir)) for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    out: dict[str, Any] = {**request.to_dict(), "files": files}
    if not files:
        out["note"] = "the profiler wrote no trace (did the run reach the profiled steps?)"
    if steps.empty or "step_time_s" not in steps:
        return out
    kept = steps[steps["step"] > warmup_steps]
    inside = kept[kept["step"].between(request.first_step, request.last_step)]["step_time_s"].dropna()
    outside = kept[~kept["step"].between(request.first_step, request.last_step + 1)]["step_time_s"].dropna()
    if len(inside) and len(outside):
        out["overhead"] = {
            "profiled_median_s": float(inside.median()),
            "other_median_s": float(outside.median()),
            "ratio": float(inside.median() / outside.median()),
            "n_profiled": int(len(inside)),
            "n_other": int(len(outside)),
        }
    else:
        out["overhead"] = {"note": "no post-warm-up step outside the window to compare with"}
    return out
