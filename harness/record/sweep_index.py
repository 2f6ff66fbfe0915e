"""The sweep index: `sweep.json`, one entry per cell of a sweep, beside the cells' run records.

A sweep folder is `<out>/<UTC time>-sweep-<random>/`, created exclusively (like run
folders), so two sweeps writing into one results folder never touch each other's
files. It holds `sweep.json` and one record folder per run. The index is rewritten
atomically after every change of a cell, so an interrupted or killed sweep leaves
an index that says exactly which cells finished; `rlbench sweep --resume DIR`
reads it and runs only the cells still to do. While a sweep runs it holds an
exclusive lock (`flock` on `DIR/.lock`), so one sweep folder is never run by two
processes at once.

    python -c "import json; print([c['status'] for c in json.load(open('results/<sweep>/sweep.json'))['cells']])"
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.status import CellStatus
from rlbench.harness.record.store import new_unique_dir, utc_now, write_json

INDEX_FILE, LOCK_FILE = "sweep.json", ".lock"
SWEEP_SCHEMA_VERSION = 2  # 2: `tp` is the trainer's tensor parallelism; version 1's `tp` was the rollout's

# Cell states. `failed` and `refused` are finished results: resume keeps them.
PENDING, RUNNING, SUCCEEDED, FAILED, REFUSED, INTERRUPTED = (
    CellStatus.PENDING,
    CellStatus.RUNNING,
    CellStatus.SUCCEEDED,
    CellStatus.FAILED,
    CellStatus.REFUSED,
    CellStatus.INTERRUPTED,
)
TO_RUN = (PENDING, RUNNING, INTERRUPTED)  # `running` in a loaded index: its sweep process died

# Fields of sweep.json, with what each holds. Kept here so there is one place to read.
INDEX_FIELDS: dict[str, str] = {
    "schema_version": "integer, SWEEP_SCHEMA_VERSION when written",
    "sweep_id": "folder name of the sweep: <UTC time>-sweep-<random>",
    "status": "running | finished | interrupted",
    "request": "{frameworks, workloads, grid {knob: [values]}, parallel [fixed KEY=VALUE], steps, seed, repeats, "
    "timeout_s}",
    "created_at": "ISO-8601 UTC",
    "updated_at": "ISO-8601 UTC of the last write",
    "cells": "list of cells, in run order (see CELL_FIELDS)",
    "groups": "spread over the repeats of each configuration (rlbench.harness.record.spread.group_spread)",
}
CELL_FIELDS: dict[str, str] = {
    "id": "c<index>, stable across resumes",
    "framework": "adapter name",
    "workload": "workload name or path, as given",
    "parallel": "{knob: value} of this cell (fixed --parallel knobs and this cell's grid values)",
    "repeat": "1-based repeat number of this configuration",
    "status": "pending | running | succeeded | failed | refused | interrupted",
    "reason": "why the cell was refused, failed or interrupted (one line), else null",
    "error": "null, or {kind, message, log_tail}; kind: timeout | oom | framework_error | launch_error | "
    "interrupted | stopped (a Ray job stopped from outside the sweep)",
    "record": "the run's record folder, relative to the sweep folder, or null when nothing was recorded",
    "previous_records": "record folders of earlier, interrupted attempts (kept, never deleted)",
    "executor": "{kind: local} or {kind: ray, address, job_id}",
    "started_at": "ISO-8601 UTC or null",
    "ended_at": "ISO-8601 UTC or null",
}


def create_sweep_dir(out: Path) -> Path:
    """A fresh, uniquely named sweep folder under `out`, created exclusively."""
    return new_unique_dir(out, "sweep", "sweep")


def save_index(sweep_dir: Path, index: dict[str, Any]) -> None:
    index["updated_at"] = utc_now()
    write_json(sweep_dir / INDEX_FILE, {"schema_version": SWEEP_SCHEMA_VERSION, **index})


# What every cell must hold for the sweep to run it again; the other CELL_FIELDS are rewritten as it runs.
_CELL_TYPES = {
    "id": str,
    "framework": str,
    "workload": str,
    "parallel": dict,
    "repeat": int,
    "status": str,
    "previous_records": list,
}


def _damaged(path: Path, problem: str) -> RLBenchError:
    return RLBenchError(
        f"{path}: damaged sweep index: {problem}; restore it from a copy, or start a new sweep "
        "(the run records beside it are intact)"
    )


def _shape_problem(index: Any) -> str | None:
    """What is wrong with a loaded index's structure, or None."""
    if not isinstance(index, dict):
        return f"it holds a {type(index).__name__}, not a JSON object"
    if not isinstance(index.get("request"), dict) or not isinstance(index.get("cells"), list):
        return "'request' (a mapping) or 'cells' (a list) is missing"
    for number, cell in enumerate(index["cells"]):
        if not isinstance(cell, dict):
            return f"cell {number} is not a mapping"
        wrong = [k for k, kind in _CELL_TYPES.items() if not isinstance(cell.get(k), kind)]
        if wrong or cell.get("record") is not None and not isinstance(cell["record"], str):
            return f"cell {number} has a missing or mistyped field {(wrong or ['record'])[0]!r}"
    return None


def load_index(sweep_dir: Path) -> dict[str, Any]:
    """sweep.json, checked: a truncated or malformed index is one RLBenchError naming it."""
    path = sweep_dir / INDEX_FILE
    try:
        index = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise RLBenchError(
            f"{sweep_dir} is not a sweep folder (no {INDEX_FILE}); pass the folder that `rlbench sweep` printed"
        ) from None
    except json.JSONDecodeError as exc:
        raise _damaged(path, f"not valid JSON ({exc.msg}, line {exc.lineno}; truncated?)") from None
    except UnicodeDecodeError:
        raise _damaged(path, "not UTF-8 text") from None
    version = index.get("schema_version") if isinstance(index, dict) else None
    if isinstance(version, bool):  # a bool is an int to Python, not to JSON: `true` is no version
        version = None
    if isinstance(version, int) and version > SWEEP_SCHEMA_VERSION:
        raise RLBenchError(
            f"{path}: sweep schema_version {version!r} is newer than this rlbench reads "
            f"(<= {SWEEP_SCHEMA_VERSION}); upgrade rlbench"
        )
    problem = (
        "no integer schema_version"
        if isinstance(index, dict) and not isinstance(version, int)
        else _shape_problem(index)
    )
    if problem:
        raise _damaged(path, problem)
    return _migrate(index)


def _rollout_tp(pairs: Any) -> Any:
    """Version 1's `tp` (the rollout engine's) as `rollout_tp`, in a {knob: value} mapping or KEY=VALUE list."""
    if isinstance(pairs, dict):
        return {("rollout_tp" if k == "tp" else k): v for k, v in pairs.items()}
    if isinstance(pairs, list):
        return [f"rollout_tp={p[3:]}" if isinstance(p, str) and p.startswith("tp=") else p for p in pairs]
    return pairs


def _migrate(index: dict[str, Any]) -> dict[str, Any]:
    """An older index in this version's terms, so a resumed sweep runs the layouts it was started with."""
    if index["schema_version"] < 2:
        request = index["request"]
        for key in ("grid", "parallel"):
            if key in request:
                request[key] = _rollout_tp(request[key])
        for cell in index["cells"]:
            cell["parallel"] = _rollout_tp(cell["parallel"])
        index["schema_version"] = SWEEP_SCHEMA_VERSION
    return index


@contextlib.contextmanager
def locked(sweep_dir: Path) -> Iterator[None]:
    """Hold the sweep folder's exclusive lock; refuse if another process holds it.

    `flock` is released by the kernel when the holder dies, so a killed sweep never
    leaves a stale lock (on NFS, flock semantics depend on the mount).
    """
    with (sweep_dir / LOCK_FILE).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise RLBenchError(
                f"sweep {sweep_dir.name} is being run by another process (pid {holder}); wait for it to end, or stop it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
