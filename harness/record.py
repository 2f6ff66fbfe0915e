"""Run records on disk: one folder per run with `run.json` and `steps.parquet`.

Every file is written atomically (temp file in the same folder, then rename), so
a reader never sees half a file and a crash never damages an earlier record. The
folder name carries a random suffix and is created exclusively, so two runs (or
two sweeps) writing into one results folder never overwrite each other.

    python -c "from rlbench.record import load_record; print(load_record('results/<run_id>')['status'])"
"""

from __future__ import annotations

import json
import math
import os
import secrets
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from rlbench.schema import SCHEMA_VERSION, STEP_METRICS, migrate

RUN_FILE, STEPS_FILE, PREDICTION_FILE = "run.json", "steps.parquet", "prediction.json"


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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    atomic_write_bytes(path, text.encode() + b"\n")


def write_run_json(run_dir: Path, record: dict[str, Any]) -> None:
    write_json(run_dir / RUN_FILE, {"schema_version": SCHEMA_VERSION, **record})


def write_steps(run_dir: Path, steps: pd.DataFrame) -> None:
    unknown = sorted(set(steps.columns) - set(STEP_METRICS))
    assert not unknown, f"columns outside the schema vocabulary: {unknown}"  # adapters map into the vocabulary
    table = steps.reindex(columns=list(STEP_METRICS)).astype("float64")
    table["step"] = table["step"].astype("int64")
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=f".{STEPS_FILE}.")
    os.close(fd)
    try:
        table.to_parquet(tmp, index=False)
        os.replace(tmp, run_dir / STEPS_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
            "mean": float(values.mean()), "median": float(values.median()),
            "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
            "min": float(values.min()), "max": float(values.max()), "n": int(len(values)),
            "unit": metric.unit, "direction": metric.direction,
        }
    return summary


def load_record(run_dir: str | Path) -> dict[str, Any]:
    """Read `run.json` (migrated to the current schema) with `steps` as a DataFrame when present."""
    run_dir = Path(run_dir)
    record = migrate(json.loads((run_dir / RUN_FILE).read_text()))
    steps_path = run_dir / STEPS_FILE
    record["steps"] = pd.read_parquet(steps_path) if steps_path.is_file() else None
    return record
