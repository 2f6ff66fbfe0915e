"""Read run records from disk for reports: the record, its steps, telemetry, comm and prediction.

Reports read only what a run left behind (asv's rule: results are files, never a
live process). A folder argument may be one record or a tree of records; every
`run.json` below it is taken. Unreadable records are refused by name, not skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rlbench.errors import RLBenchError
from rlbench.profiling import COMM_FILE, TELEMETRY_FILE
from rlbench.record import PREDICTION_FILE, RUN_FILE, load_record
from rlbench.schema import SchemaError


@dataclass(frozen=True)
class RunView:
    path: Path
    record: dict[str, Any]  # run.json, migrated; `steps` removed (see below)
    steps: pd.DataFrame | None
    telemetry: pd.DataFrame | None
    comm: pd.DataFrame | None
    prediction: dict[str, Any] | None
    label: str  # unique within one report: see `load_runs`

    @property
    def steady_steps(self) -> pd.DataFrame | None:
        """Steps after the workload's warm-up, the ones every summary is taken over."""
        if self.steps is None:
            return None
        return self.steps[self.steps["step"] > self.record["workload"].get("warmup_steps", 0)]


def base_label(record: dict[str, Any]) -> str:
    """framework · workload · non-default parallelism · seed, short enough for a figure axis."""
    parallel = record.get("parallel") or {}
    defaults = {"dp": 1, "tp": 1, "pp": 1, "sp": 1, "placement": "colocated", "async": "off"}
    knobs = " ".join(f"{k}={v}" for k, v in parallel.items() if defaults.get(k) != v) or "defaults"
    return f"{record['framework']['name']} · {record['workload']['name']} · {knobs} · seed {record.get('seed', 0)}"


def find_record_dirs(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise RLBenchError(f"{path}: no such folder; pass run record folders or a results folder")
        if (path / RUN_FILE).is_file():
            found.append(path)
        else:
            found += sorted(p.parent for p in path.rglob(RUN_FILE))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise RLBenchError(f"no run records (run.json) under {', '.join(map(str, paths))}; run `rlbench run` first")
    return unique


def _parquet(path: Path) -> pd.DataFrame | None:
    return pd.read_parquet(path) if path.is_file() else None


def load_run(path: Path) -> RunView:
    try:
        record = load_record(path)
    except (json.JSONDecodeError, SchemaError, KeyError) as exc:
        raise RLBenchError(f"{path / RUN_FILE}: not a readable run record ({exc}); remove it or pass other folders") from None
    steps = record.pop("steps")
    prediction = json.loads((path / PREDICTION_FILE).read_text()) if (path / PREDICTION_FILE).is_file() else None
    return RunView(path=path, record=record, steps=steps, telemetry=_parquet(path / TELEMETRY_FILE),
                   comm=_parquet(path / COMM_FILE), prediction=prediction,
                   label=base_label(record))


def load_runs(paths: list[Path]) -> list[RunView]:
    """Every record under `paths`, oldest first."""
    runs = sorted((load_run(p) for p in find_record_dirs(paths)),
                  key=lambda run: (run.record.get("started_at") or "", run.path.name))
    counts = Counter(run.label for run in runs)
    # Repeats of one configuration share a label; the record's random suffix tells them apart.
    return [replace(run, label=f"{run.label} · {run.path.name.rsplit('-', 1)[-1]}") if counts[run.label] > 1 else run
            for run in runs]
