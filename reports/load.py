"""Run records as a report draws them: every file of each record under the folders given, labelled.

Readers read only what a run left behind (asv's rule: results are files, never a
live process). A folder argument may be one record or a tree of records; every
`run.json` below it is taken. Each record is read by `rlbench.harness.record.read.read_record`
(migrated, guarded); its telemetry, comm and prediction files are checked here. A
damaged record raises `DamagedRecord` naming the file and what is wrong: `rlbench
report` names and skips it, `rlbench compare` refuses it (exit 2).

    python -c "from rlbench.reports.load import load_runs; print([r.label for r in load_runs(['results'])])"
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.read import DamagedRecord, read_prediction, read_record, read_table
from rlbench.harness.record.schema import RUN_FILE, SPAN_COLUMNS, SPANS_FILE
from rlbench.harness.run.profiling import COMM_FILE, TELEMETRY_FILE
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.telemetry.columns import COLUMNS as TELEMETRY_COLUMNS

TELEMETRY_NUMERIC = tuple(c.name for c in TELEMETRY_COLUMNS if c.kind in ("float", "int"))


@dataclass(frozen=True)
class RunView:
    path: Path
    record: dict[str, Any]  # run.json, migrated; `steps` removed (see below)
    steps: pd.DataFrame | None
    telemetry: pd.DataFrame | None
    comm: pd.DataFrame | None
    prediction: dict[str, Any] | None
    label: str  # unique within one report: see `load_runs`
    spans: pd.DataFrame | None = None  # stage calls with real starts (spans.parquet), where the framework logs them

    @property
    def steady_steps(self) -> pd.DataFrame | None:
        """Steps after the workload's warm-up, the ones every summary is taken over."""
        if self.steps is None:
            return None
        return self.steps[self.steps["step"] > self.record["workload"].get("warmup_steps", 0)]


def base_label(record: dict[str, Any]) -> str:
    """framework · workload · non-default parallelism · seed, short enough for a figure axis."""
    parallel = record.get("parallel") or {}  # as read: migrated, every knob
    defaults = Parallelism().to_dict()
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


def load_run(path: Path) -> RunView:
    """Every file a report draws from one record; any damaged one raises `DamagedRecord`."""
    record = read_record(path)
    steps = record.pop("steps")
    return RunView(
        path=path,
        record=record,
        steps=steps,
        telemetry=read_table(path, TELEMETRY_FILE, ("time_unix_s",), TELEMETRY_NUMERIC),
        comm=read_table(path, COMM_FILE, ("op", "total_bytes"), ("total_bytes",)),
        prediction=read_prediction(path),
        label=base_label(record),
        spans=read_table(path, SPANS_FILE, SPAN_COLUMNS, ("step", "start_unix_s", "end_unix_s")),
    )


def load_runs(paths: list[Path], damaged: list[DamagedRecord] | None = None) -> list[RunView]:
    """Every record under `paths`, oldest first.

    With a `damaged` list, a damaged record is appended to it and left out; without one it is raised."""
    runs, skipped = [], []
    for path in find_record_dirs(paths):
        try:
            runs.append(load_run(path))
        except DamagedRecord as exc:
            if damaged is None:
                raise
            skipped.append(exc)
    if not runs:
        raise RLBenchError(
            f"no readable run record under {', '.join(map(str, paths))}: {skipped[0]}"
            + (f" (and {len(skipped) - 1} more damaged)" if len(skipped) > 1 else "")
            + "; restore the record from a copy or pass other folders"
        )
    if damaged is not None:
        damaged += skipped
    runs.sort(key=lambda run: (run.record.get("started_at") or "", run.path.name))
    counts = Counter(run.label for run in runs)
    # Repeats of one configuration share a label; the record's random suffix tells them apart.
    return [
        replace(run, label=f"{run.label} · {run.path.name.rsplit('-', 1)[-1]}") if counts[run.label] > 1 else run
        for run in runs
    ]
