"""Read one run record back: the one reader every command uses (report, compare, nightly, sweep, calibrate).

`read_record` returns run.json typed (`rlbench.harness.record.run_record.ReadRecord`), migrated to the current
schema, with every current `--parallel` knob, and `steps` as a DataFrame or None. A record whose files cannot be read
(a truncated run.json, a damaged steps.parquet, a field of the wrong type) raises `DamagedRecord` naming
the file and what is wrong; a record of a newer schema raises it too, saying to upgrade.

    python -c "from rlbench.harness.record.read import read_record; print(read_record('results/<run_id>')['status'])"
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.run_record import ReadRecord, SchemaError, migrate, shape_problem
from rlbench.harness.record.schema import PREDICTION_FILE, RUN_FILE, STEP_METRICS, STEPS_FILE
from rlbench.harness.spec.parallel import Parallelism

# What a pyarrow/pandas parquet read raises on a damaged file (ArrowInvalid is also a ValueError,
# ArrowIOError an OSError); anything else from the reader is a bug and keeps its traceback.
PARQUET_ERRORS = (OSError, ValueError, pyarrow.ArrowException)


class DamagedRecord(RLBenchError):
    """A record folder with a file that cannot be read; `problem` says which and why."""

    def __init__(self, path: Path, problem: str, what: str = "damaged run record") -> None:
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {what}: {problem}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def read_run_json(run_dir: str | Path) -> dict[str, Any]:
    """run.json alone, migrated to the current schema; its fields unchecked (a sweep rewriting the status of a
    record it has just written needs no more). Use `read_record` to read a record's data."""
    run_dir = Path(run_dir)
    if (run_dir / RUN_FILE).exists() and not (run_dir / RUN_FILE).is_file():  # named and skipped, never fatal
        raise DamagedRecord(run_dir, f"{RUN_FILE} is a folder, not a file")
    if not (run_dir / RUN_FILE).is_file():
        raise RLBenchError(f"{run_dir} is not a run record folder (no {RUN_FILE}); pass a folder under results/")
    try:
        record = json.loads((run_dir / RUN_FILE).read_bytes().decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise DamagedRecord(
            run_dir, f"{RUN_FILE} is not valid JSON ({exc.msg}, line {exc.lineno}; truncated?)"
        ) from None
    except UnicodeDecodeError:
        raise DamagedRecord(run_dir, f"{RUN_FILE} is not UTF-8 text") from None
    if not isinstance(record, dict):
        raise DamagedRecord(run_dir, f"{RUN_FILE} is not a JSON object")
    try:
        return migrate(record)
    except SchemaError as exc:  # intact, but written by a newer rlbench (or not a record at all)
        raise DamagedRecord(run_dir, str(exc), "unreadable run record") from None


def read_prediction(run_dir: str | Path) -> dict[str, Any] | None:
    """prediction.json, or None where the run wrote none; one that is not a JSON object raises `DamagedRecord`
    (every reader: report, trace, predict --from-record)."""
    run_dir = Path(run_dir)
    path = run_dir / PREDICTION_FILE
    if not path.is_file():
        return None
    try:
        prediction = json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedRecord(run_dir, f"{PREDICTION_FILE} is not valid JSON ({first_line(exc)})") from None
    except OSError as exc:
        raise DamagedRecord(run_dir, f"{PREDICTION_FILE} cannot be read ({exc.strerror or exc})") from None
    if not isinstance(prediction, dict):
        raise DamagedRecord(run_dir, f"{PREDICTION_FILE} holds a {type(prediction).__name__}, not a JSON object")
    return prediction


def read_steps(run_dir: str | Path) -> pd.DataFrame | None:
    """steps.parquet, or None when the run logged no step; a damaged file raises `DamagedRecord`."""
    return read_table(Path(run_dir), STEPS_FILE, required=("step",), numeric=STEP_METRICS)


def read_table(run_dir: Path, name: str, required: tuple[str, ...], numeric: Iterable[str] = ()) -> pd.DataFrame | None:
    """One parquet file of a record (steps, telemetry, NCCL), or None where the run wrote none; a file that does
    not read, lacks a `required` column or holds a non-numeric `numeric` one raises `DamagedRecord`."""
    path = run_dir / name
    if not path.is_file():
        return None
    try:
        table = pd.read_parquet(path)
    except PARQUET_ERRORS as exc:
        raise DamagedRecord(run_dir, f"{name} is not a readable parquet file ({first_line(exc)})") from None
    missing = [column for column in required if column not in table]
    if missing:
        raise DamagedRecord(run_dir, f"{name} has no {', '.join(map(repr, missing))} column")
    odd = [c for c in numeric if c in table and not pd.api.types.is_numeric_dtype(table[c])]
    if odd:
        raise DamagedRecord(run_dir, f"{name} column {odd[0]!r} is not numeric")
    return table


def read_record(run_dir: str | Path) -> ReadRecord:
    """run.json (migrated, checked) with `steps` as a DataFrame or None; a damaged record raises `DamagedRecord`.

    A folder with no run.json at all is an `RLBenchError` (not a record), a newer schema a `DamagedRecord`
    that says to upgrade. `parallel` holds every current knob: those a record predates at their defaults."""
    record = read_run_json(run_dir)
    steps = read_steps(run_dir)
    problem = shape_problem(record)
    if problem:
        raise DamagedRecord(Path(run_dir), problem)
    record["parallel"] = {**Parallelism().to_dict(), **record["parallel"]}
    record["steps"] = steps
    return cast(ReadRecord, record)
