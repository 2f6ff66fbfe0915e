"""Read run records from disk for reports, compare and nightly: the one guarded loader.

Readers read only what a run left behind (asv's rule: results are files, never a
live process). A folder argument may be one record or a tree of records; every
`run.json` below it is taken. A record whose files cannot be read (a truncated
run.json, a damaged parquet file, a prediction.json that is not JSON) raises
`DamagedRecord` naming the file and what is wrong: `rlbench report` names and
skips it, `rlbench compare` refuses it (exit 2).

    python -c "from rlbench.reports.load import read_record; print(read_record('results/<run_id>')['status'])"
"""

from __future__ import annotations

import json
import numbers
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow

from rlbench.errors import RLBenchError
from rlbench.record.schema import STEP_METRICS, SchemaError
from rlbench.record.store import PREDICTION_FILE, RUN_FILE, STEPS_FILE, load_record
from rlbench.run.parallel import Parallelism, recorded_parallel
from rlbench.run.profiling import COMM_FILE, TELEMETRY_FILE
from rlbench.telemetry.columns import COLUMNS as TELEMETRY_COLUMNS

TELEMETRY_NUMERIC = tuple(c.name for c in TELEMETRY_COLUMNS if c.kind in ("float", "int"))

# What a pyarrow/pandas parquet read raises on a damaged file (ArrowInvalid is also a ValueError,
# ArrowIOError an OSError); anything else from the reader is a bug and keeps its traceback.
_PARQUET_ERRORS = (OSError, ValueError, pyarrow.ArrowException)


class DamagedRecord(RLBenchError):
    """A record folder with a file that cannot be read; `problem` says which and why."""

    def __init__(self, path: Path, problem: str, what: str = "damaged run record") -> None:
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {what}: {problem}")


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
    parallel = recorded_parallel(record.get("parallel") or {})  # an older record's `tp` is the rollout's
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


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _dicts(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


# run.json fields the report's tables and figures index, and what each must be when present and not null
# (null means "not measured"). A record that breaks one is damaged: named and skipped, never a traceback.
_FIELDS: dict[tuple[str, ...], tuple[Any, str]] = {
    ("error",): (dict, "a mapping"),
    ("environment",): (dict, "a mapping"),
    ("costs",): (dict, "a mapping"),
    ("rlbench",): (dict, "a mapping"),
    ("vs_model",): (dict, "a mapping"),
    ("summary",): (_dicts, "a mapping of mappings"),
    ("duration_s",): (_is_number, "a number"),
    ("started_at",): (str, "a string"),
    ("environment", "gpus"): (
        lambda v: isinstance(v, list) and all(isinstance(g, dict) for g in v),
        "a list of mappings",
    ),
    ("environment", "packages"): (dict, "a mapping"),
    ("environment", "cpu_count"): (_is_number, "a number"),
    ("environment", "memory_gb"): (_is_number, "a number"),
    ("costs", "energy_per_mtok_j"): (_is_number, "a number"),
    ("costs", "cost_per_mtok_usd"): (_is_number, "a number"),
    ("vs_model", "stages"): (_dicts, "a mapping of mappings"),
    ("vs_model", "step"): (dict, "a mapping"),
    ("vs_model", "bubble"): (_is_number, "a number"),
}


def _field_problem(record: dict[str, Any], path: tuple[str, ...], check: Any, what: str) -> str | None:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    ok = isinstance(value, check) if isinstance(check, type) else check(value)
    return None if value is None or ok else f"{RUN_FILE} field {'.'.join(path)} is not {what}"


def _shape_problem(record: Any) -> str | None:
    """What is wrong with run.json's structure for a reader, or None: every field a reader indexes."""
    if not isinstance(record, dict):
        return f"{RUN_FILE} holds a {type(record).__name__}, not a JSON object"
    for field, kind in (("framework", dict), ("workload", dict), ("parallel", dict), ("status", str)):
        if not isinstance(record.get(field), kind):
            return f"{RUN_FILE} field {field!r} is missing or not a {'mapping' if kind is dict else 'string'}"
    if not isinstance(record["framework"].get("name"), str):
        return f"{RUN_FILE} field framework.name is missing or not a string"
    if not isinstance(record["workload"].get("name"), str) or not _is_number(record["workload"].get("warmup_steps", 0)):
        return f"{RUN_FILE} field workload.name or workload.warmup_steps is missing or of the wrong type"
    problems = (_field_problem(record, path, check, what) for path, (check, what) in _FIELDS.items())
    if problem := next((p for p in problems if p), None):
        return problem
    for name, stats in (record.get("summary") or {}).items():
        if not all(_is_number(stats.get(k)) for k in ("median", "std", "n")):
            return f"{RUN_FILE} field summary.{name} lacks a numeric median, std or n"
    for stage, row in {
        **((record.get("vs_model") or {}).get("stages") or {}),
        "step": (record.get("vs_model") or {}).get("step") or {},
    }.items():
        if not all(row.get(k) is None or _is_number(row[k]) for k in ("measured_s", "predicted_s")):
            return f"{RUN_FILE} field vs_model.{stage} has a measured_s or predicted_s that is not a number"
    return None


def _read_parquet(
    run_dir: Path, name: str, required: tuple[str, ...], numeric: tuple[str, ...] = ()
) -> pd.DataFrame | None:
    path = run_dir / name
    if not path.is_file():
        return None
    try:
        table = pd.read_parquet(path)
    except _PARQUET_ERRORS as exc:
        raise DamagedRecord(run_dir, f"{name} is not a readable parquet file ({_first_line(exc)})") from None
    missing = [column for column in required if column not in table]
    if missing:
        raise DamagedRecord(run_dir, f"{name} lacks the column(s) {', '.join(missing)}")
    odd = [c for c in numeric if c in table and not pd.api.types.is_numeric_dtype(table[c])]
    if odd:
        raise DamagedRecord(run_dir, f"{name} column {odd[0]!r} is not numeric")
    return table


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def read_record(run_dir: str | Path) -> dict[str, Any]:
    """run.json (migrated) with `steps` as a DataFrame or None; a damaged record raises `DamagedRecord`.

    A folder with no run.json at all is an `RLBenchError` (not a record), a newer schema too (upgrade)."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_FILE).is_file():
        raise RLBenchError(f"{run_dir} is not a run record folder (no {RUN_FILE}); pass a folder under results/")
    try:
        record = load_record(run_dir)
    except json.JSONDecodeError as exc:
        raise DamagedRecord(
            run_dir, f"{RUN_FILE} is not valid JSON ({exc.msg}, line {exc.lineno}; truncated?)"
        ) from None
    except UnicodeDecodeError:
        raise DamagedRecord(run_dir, f"{RUN_FILE} is not UTF-8 text") from None
    except SchemaError as exc:  # intact, but written by a newer rlbench (or not a record at all)
        raise DamagedRecord(run_dir, str(exc), "unreadable run record") from None
    except AttributeError:  # migrate() calls .get on a JSON list or number
        raise DamagedRecord(run_dir, f"{RUN_FILE} is not a JSON object") from None
    except _PARQUET_ERRORS as exc:  # load_record reads steps.parquet too
        raise DamagedRecord(run_dir, f"{STEPS_FILE} is not a readable parquet file ({_first_line(exc)})") from None
    problem = _shape_problem(record)
    if problem:
        raise DamagedRecord(run_dir, problem)
    record["parallel"] = recorded_parallel(record["parallel"])  # readers see today's knobs, old records too
    steps = record["steps"]
    if steps is not None:
        if "step" not in steps:
            raise DamagedRecord(run_dir, f"{STEPS_FILE} has no 'step' column")
        odd = [c for c in steps.columns if c in STEP_METRICS and not pd.api.types.is_numeric_dtype(steps[c])]
        if odd:
            raise DamagedRecord(run_dir, f"{STEPS_FILE} column {odd[0]!r} is not numeric")
    return record


def _read_prediction(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / PREDICTION_FILE
    if not path.is_file():
        return None
    try:
        prediction = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedRecord(run_dir, f"{PREDICTION_FILE} is not valid JSON ({_first_line(exc)})") from None
    if not isinstance(prediction, dict):
        raise DamagedRecord(run_dir, f"{PREDICTION_FILE} holds a {type(prediction).__name__}, not a JSON object")
    return prediction


def load_run(path: Path) -> RunView:
    """Every file a report draws from one record; any damaged one raises `DamagedRecord`."""
    record = read_record(path)
    steps = record.pop("steps")
    return RunView(
        path=path,
        record=record,
        steps=steps,
        telemetry=_read_parquet(path, TELEMETRY_FILE, ("time_unix_s",), TELEMETRY_NUMERIC),
        comm=_read_parquet(path, COMM_FILE, ("op", "total_bytes"), ("total_bytes",)),
        prediction=_read_prediction(path),
        label=base_label(record),
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
