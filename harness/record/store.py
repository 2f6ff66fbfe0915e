"""Run records on disk: one folder per run with `run.json` and `steps.parquet`.

Every file is written atomically (temp file in the same folder, then rename), so
a reader never sees half a file and a crash never damages an earlier record. The
folder name carries a random suffix and is created exclusively, so two runs (or
two sweeps) writing into one results folder never overwrite each other.

    rlbench run --framework trl --workload gsm8k-grpo-tiny --steps 3   # writes results/<run_id>/

Reading a record back is `rlbench.harness.record.read.read_record`.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from rlbench.harness.atomic import replacing, write_bytes
from rlbench.harness.record.schema import RUN_FILE, SPAN_COLUMNS, SPANS_FILE, STEP_METRICS, STEPS_FILE
from rlbench.harness.record.status import RunStatus

HEARTBEAT_S = 30.0  # how often a live runner touches its run.json
STALE_AFTER_S = 600.0  # a heartbeat this old means the runner is gone (20 missed beats: a busy machine, a slow NFS)
GRACE_S = 600.0  # past started_at + timeout_s + this, no live runner can still be at work on the run


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_unique_dir(out: Path, label: str, what: str = "run") -> Path:
    """Create `out/<UTC stamp>-<label>-<random hex>` exclusively (absolute: frameworks run inside it).

    Run, sweep and night folders all come from here, so two processes writing into one
    results folder never share a folder."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for _ in range(5):
        path = out / f"{stamp}-{label}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a unique {what} folder under {out}")


def new_run_dir(out: Path, framework: str, workload: str) -> Path:
    """Create a fresh, uniquely named run folder under `out`."""
    return new_unique_dir(out, f"{framework}-{workload}")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _finite(value: Any) -> Any:
    """JSON has no NaN: write null instead, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic JSON with NaN/inf written as null."""
    text = json.dumps(_finite(data), indent=2, default=_json_default, allow_nan=False)
    write_bytes(path, text.encode() + b"\n")


def write_json_in_place(path: Path, data: dict[str, Any]) -> None:
    """Last resort on a full disk, where the atomic write has no room for its second copy: overwrite the existing
    file in place, compactly (no indent), so it fits in the blocks the file already holds."""
    text = json.dumps(_finite(data), default=_json_default, allow_nan=False, separators=(",", ":"))
    with path.open("r+b") as handle:
        handle.write(text.encode() + b"\n")
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def write_steps(run_dir: Path, steps: pd.DataFrame) -> None:
    unknown = sorted(set(steps.columns) - set(STEP_METRICS))
    assert not unknown, f"columns outside the schema vocabulary: {unknown}"  # adapters map into the vocabulary
    table = steps.reindex(columns=list(STEP_METRICS)).astype("float64")
    table["step"] = table["step"].astype("int64")
    with replacing(run_dir / STEPS_FILE) as tmp:
        table.to_parquet(tmp, index=False)


def write_spans(run_dir: Path, spans: pd.DataFrame) -> None:
    """spans.parquet: one row per timed stage call (SPAN_COLUMNS)."""
    table = spans.reindex(columns=list(SPAN_COLUMNS))
    table = table.astype({"step": "int64", "stage": "string", "start_unix_s": "float64", "end_unix_s": "float64"})
    with replacing(run_dir / SPANS_FILE) as tmp:
        table.to_parquet(tmp, index=False)


def summarize(steps: pd.DataFrame, warmup_steps: int) -> dict[str, dict[str, Any]]:
    """Mean/median/spread of each metric over the steps after warm-up."""
    steady = steps[steps["step"] > warmup_steps]
    summary: dict[str, dict[str, Any]] = {}
    for name, metric in STEP_METRICS.items():
        if name == "step" or metric.unit == "unix s" or name not in steady:
            continue
        values = steady[name].dropna()
        if values.empty:
            continue
        summary[name] = {
            "mean": float(values.mean()),
            "median": float(values.median()),
            "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "min": float(values.min()),
            "max": float(values.max()),
            "n": int(len(values)),
            "unit": metric.unit,
            "direction": metric.direction,
        }
    return summary


def runner_identity() -> dict[str, Any]:
    """Who writes a running record: host, PID and the PID's start time (PIDs are reused), and the heartbeat."""
    import psutil

    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started_unix_s": psutil.Process().create_time(),
        "heartbeat_s": HEARTBEAT_S,
    }


def heartbeat(run_dir: Path) -> None:
    """Touch run.json (its mtime is the heartbeat): no data is written, so it works on a full disk too."""
    try:
        os.utime(run_dir / RUN_FILE)
    except OSError:  # read-only or gone: the PID in the record still tells a reader here
        pass


def _pid_alive(pid: int, started_unix_s: float | None) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        alive = process.status() != psutil.STATUS_ZOMBIE
        return alive and (started_unix_s is None or abs(process.create_time() - started_unix_s) < 1.0)
    except psutil.Error:
        return False


def effective_status(record: dict[str, Any], run_dir: str | Path | None = None, now: float | None = None) -> str:
    """The status a reader shows: the record's own, except that a "running" record whose runner is gone
    (killed with SIGKILL, the machine lost) is "abandoned".

    Evidence, strongest first: on the runner's host, whether its PID (with the same start time) lives;
    elsewhere, run.json's mtime, which a live runner touches every heartbeat_s; for records without
    either, whether started_at + timeout_s is long past (the runner would have stopped the run by then)."""
    status = record.get("status")
    if status != RunStatus.RUNNING:
        return str(status)
    now = time.time() if now is None else now
    runner = record.get("runner") if isinstance(record.get("runner"), dict) else {}
    if runner.get("host") == socket.gethostname() and isinstance(runner.get("pid"), int):
        return "running" if _pid_alive(runner["pid"], runner.get("pid_started_unix_s")) else "abandoned"
    if runner.get("heartbeat_s") and run_dir is not None:
        try:
            beat = (Path(run_dir) / RUN_FILE).stat().st_mtime
        except OSError:
            beat = None
        if beat is not None:
            return "abandoned" if now - beat > STALE_AFTER_S else "running"
    try:
        started = datetime.fromisoformat(str(record.get("started_at"))).timestamp()
        timeout = float(record.get("timeout_s") or 0.0)
    except (TypeError, ValueError):
        # Nothing the runner wrote says when it started or whether it lives: the file's own age is the only
        # evidence left, and a record untouched for longer than a heartbeat's staleness is nobody's.
        try:
            untouched = now - (Path(run_dir) / RUN_FILE).stat().st_mtime if run_dir is not None else None
        except OSError:
            untouched = None
        return "abandoned" if untouched is not None and untouched > STALE_AFTER_S else "running"
    return "abandoned" if timeout > 0 and now > started + timeout + GRACE_S else "running"
