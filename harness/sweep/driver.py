"""Sweeps: frameworks x workloads x a grid of `--parallel` knobs x repeats, one record per run.

The grid is expanded into cells; a cell its adapter refuses is marked `refused`
with the adapter's reason before anything runs. The other cells run one at a time
through an executor (`rlbench.harness.sweep.executors`); each run's outcome, failed or not, goes
into the sweep index (`rlbench.harness.record.sweep_index`) and the sweep goes on. Repeats are the
outer loop (every configuration once, then again), so slow drift of the machine
spreads over configurations instead of biasing one.

    rlbench sweep --framework verl,trl --workload gsm8k-grpo --grid rollout_tp=1,2,4 \\
        --grid placement=colocated,disaggregated --repeats 3
    rlbench sweep --resume results/<sweep-id>
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.out_dir import check_writable
from rlbench.harness.record.read import read_record
from rlbench.harness.record.spread import cell_label, group_spread
from rlbench.harness.record.status import CellStatus
from rlbench.harness.record.store import utc_now
from rlbench.harness.record.sweep_index import (
    INDEX_FILE,
    INTERRUPTED,
    PENDING,
    REFUSED,
    RUNNING,
    SUCCEEDED,
    TO_RUN,
    create_sweep_dir,
    load_index,
    locked,
    save_index,
)
from rlbench.harness.run.exceptions import RunInterrupted
from rlbench.harness.settings import run_timeout_s
from rlbench.harness.spec.parallel import knob_pairs, parse_grid, parse_parallel
from rlbench.harness.spec.runspec import RunSpec, check_seed
from rlbench.harness.sweep.executors.executor import Executor, RunResult, Terminated, failure


class SweepInterrupted(RunInterrupted):
    """Ctrl-C during a sweep: finished records and the index are kept; `--resume` continues."""


# Cells one sweep may hold: at the fastest (a tiny CPU run, about 30 s) 10,000 cells are three days of runs, and
# the index stays a few MB that every cell rewrites.
MAX_CELLS = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepRequest:
    """What the user asked for; stored in the index so `--resume` rebuilds the same runs."""

    frameworks: tuple[str, ...]
    workloads: tuple[str, ...]
    grid: dict[str, list[str]] = field(default_factory=dict)
    parallel: tuple[str, ...] = ()  # fixed KEY=VALUE knobs of every cell
    steps: int | None = None
    seed: int = 0
    repeats: int = 1
    timeout_s: float = 7200.0
    vary_seed: bool = False  # repeat r runs with seed + r - 1 (time to target over seeds), else all share `seed`

    def __post_init__(self) -> None:
        if not self.frameworks or not self.workloads:
            raise RLBenchError("a sweep needs at least one --framework and one --workload")
        if self.repeats < 1:
            raise RLBenchError(f"--repeats {self.repeats}: must be at least 1")
        fixed = {pair.partition("=")[0].strip() for pair in self.parallel}
        if clash := sorted(fixed & set(self.grid)):
            raise RLBenchError(f"knob {clash[0]!r} is both fixed (--parallel) and swept (--grid); keep one")
        if (cells := self.cell_count) > MAX_CELLS:  # counted, never expanded: 10^6 cells once sat silent for minutes
            raise RLBenchError(
                f"the sweep has {cells:,} cells ({self.repeats} repeat(s) x {len(self.frameworks)} framework(s) x "
                f"{len(self.workloads)} workload(s) x {math.prod(len(v) for v in self.grid.values())} grid point(s)), "
                f"more than the {MAX_CELLS:,} one sweep may hold; split it into smaller sweeps"
            )

    @property
    def cell_count(self) -> int:
        return self.repeats * len(self.frameworks) * len(self.workloads) * math.prod(len(v) for v in self.grid.values())

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SweepRequest:
        return cls(
            **{
                **values,
                "frameworks": tuple(values["frameworks"]),
                "workloads": tuple(values["workloads"]),
                "parallel": tuple(values["parallel"]),
            }
        )


def request_from_options(
    framework: str | None,
    workload: str | None,
    grid: tuple[str, ...],
    parallel: tuple[str, ...],
    steps: int | None,
    seed: int,
    repeats: int,
    resume: Path | None,
    vary_seed: bool = False,
) -> SweepRequest | None:
    """The sweep `rlbench sweep`'s options ask for; None where they only resume one (--resume)."""
    if not (framework or workload or grid):
        if resume is None:
            raise RLBenchError("sweep: give --framework and --workload, or --resume SWEEP_DIR")
        return None
    if not (framework and workload):
        raise RLBenchError("sweep: give both --framework and --workload (or only --resume SWEEP_DIR)")
    if vary_seed:  # its last repeat's seed is the largest a cell gets
        check_seed(seed + repeats - 1, f"--seed {seed} --repeats {repeats} --vary-seed: the last repeat's seed")
    return SweepRequest(
        frameworks=parse_list(framework),
        workloads=parse_list(workload),
        grid=parse_grid(grid)[0],
        parallel=parallel,
        steps=steps,
        seed=seed,
        repeats=repeats,
        timeout_s=run_timeout_s(),
        vary_seed=vary_seed,
    )


def open_sweep(request: SweepRequest | None, executor: Executor, out: Path, resume: Path | None) -> Path:
    """The sweep folder to run: `resume`, checked against `request` where both are given, or a new one under
    `out` (refused before any run when it cannot be written)."""
    if resume is not None:
        check_resume(resume, request)
        return resume
    assert request is not None, "request_from_options gives a request where there is no --resume"
    return start(request, executor, check_writable(out))


def cells_to_run(index: dict[str, Any]) -> int:
    """Cells of the index not yet ended (succeeded, failed or refused)."""
    return sum(
        cell["status"] not in (CellStatus.SUCCEEDED, CellStatus.FAILED, CellStatus.REFUSED) for cell in index["cells"]
    )


def succeeded(index: dict[str, Any]) -> bool:
    """A sweep succeeds when no cell failed and at least one ran to the end."""
    statuses = [cell["status"] for cell in index["cells"]]
    return CellStatus.FAILED not in statuses and CellStatus.SUCCEEDED in statuses


def parse_list(text: str) -> tuple[str, ...]:
    """`verl,trl` -> ("verl", "trl")."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def expand(request: SweepRequest) -> list[dict[str, Any]]:
    """Every cell of the sweep, in run order: repeats outermost, then framework, workload, grid."""
    fixed = dict(pair.split("=", 1) for pair in request.parallel)
    combos = [dict(zip(request.grid, values)) for values in itertools.product(*request.grid.values())]
    cells = []
    for repeat, framework, workload, combo in itertools.product(
        range(1, request.repeats + 1), request.frameworks, request.workloads, combos
    ):
        cells.append(
            {
                "id": f"c{len(cells):03d}",
                "framework": framework,
                "workload": workload,
                "parallel": {**fixed, **combo},
                "repeat": repeat,
                "status": PENDING,
                "reason": None,
                "error": None,
                "record": None,
                "previous_records": [],
                "executor": None,
                "started_at": None,
                "ended_at": None,
            }
        )
    return cells


def cell_seed(request: SweepRequest, cell: dict[str, Any]) -> int:
    """The seed of one cell: the sweep's, or with --vary-seed the sweep's plus the repeat's number less one."""
    return request.seed + (cell["repeat"] - 1 if request.vary_seed else 0)


def run_args(request: SweepRequest, cell: dict[str, Any]) -> list[str]:
    """The `rlbench run` arguments (without --out) of one cell."""
    args = ["--framework", cell["framework"], "--workload", cell["workload"], "--seed", str(cell_seed(request, cell))]
    args += ["--steps", str(request.steps)] if request.steps else []
    for knob, value in cell["parallel"].items():
        args += ["--parallel", f"{knob}={value}"]
    return args


def build_spec(request: SweepRequest, cell: dict[str, Any], out: Path, workloads: dict[str, Any]) -> RunSpec:
    from rlbench.workloads.catalog import load_workload

    if cell["workload"] not in workloads:
        loaded = load_workload(cell["workload"])
        workloads[cell["workload"]] = loaded.with_steps(request.steps) if request.steps else loaded
    return RunSpec(
        framework=cell["framework"],
        workload=workloads[cell["workload"]],
        parallel=parse_parallel(knob_pairs(cell["parallel"])),
        seed=cell_seed(request, cell),
        out=out,
        timeout_s=request.timeout_s,
    )


def plan(request: SweepRequest, executor: Executor, out: Path) -> dict[str, Any]:
    """The index of a new sweep: its cells, those the adapters refuse marked with the reason. Writes nothing."""
    from rlbench.adapters.registry import get_adapter

    for name in request.frameworks:
        get_adapter(name)  # an unknown framework is a mistake, not a refusal
    cells, workloads, refusals = expand(request), {}, {}
    for cell in cells:
        spec = build_spec(request, cell, out, workloads)  # a bad workload or knob value is a mistake too
        key = json.dumps([cell["framework"], cell["workload"], cell["parallel"]], sort_keys=True)
        if key not in refusals:
            try:
                executor.check(spec, run_args(request, cell))
                refusals[key] = None
            except RLBenchError as exc:
                refusals[key] = str(exc)
        if refusals[key] is not None:
            cell.update(status=REFUSED, reason=refusals[key])
    return {
        "sweep_id": None,
        "status": PENDING,
        "request": request.to_dict(),
        "created_at": utc_now(),
        "cells": cells,
        "groups": [],
    }


def start(request: SweepRequest, executor: Executor, out: Path) -> Path:
    """Plan the sweep, then create its folder and first index (exclusively: never another sweep's)."""
    index = plan(request, executor, out)
    sweep_dir = create_sweep_dir(out)
    index["sweep_id"] = sweep_dir.name
    save_index(sweep_dir, index)
    return sweep_dir


def stored_request(sweep_dir: Path, index: dict[str, Any]) -> SweepRequest:
    """The request an index was made from; a malformed one is an RLBenchError naming the index."""
    try:
        return SweepRequest.from_dict(index["request"])
    except (KeyError, TypeError, ValueError) as exc:  # a field missing, of the wrong type, or unknown
        raise RLBenchError(
            f"{sweep_dir / INDEX_FILE}: damaged sweep index: its request is malformed "
            f"({type(exc).__name__}: {exc}); restore it from a copy, or start a new sweep"
        ) from None


def check_resume(sweep_dir: Path, request: SweepRequest | None) -> SweepRequest:
    """The stored request; a request given again on the command line must be the same one."""
    stored = stored_request(sweep_dir, load_index(sweep_dir))
    if request is not None and request != stored:
        given, own = request.to_dict(), stored.to_dict()
        differ = ", ".join(f"{name} {given[name]!r} (sweep: {own[name]!r})" for name in own if given[name] != own[name])
        raise RLBenchError(
            f"--resume {sweep_dir}: the options differ from the sweep's own: {differ}; "
            "drop them to resume as it was, or start a new sweep without --resume"
        )
    return stored


def _finish_cell(cell: dict[str, Any], result: RunResult) -> None:
    error = result.error
    cell.update(
        status=result.status,
        error=error,
        executor=result.executor,
        ended_at=utc_now(),
        record=result.record.name if result.record is not None else None,
        reason=None if error is None else _reason(error),
    )


def _reason(error: dict[str, Any]) -> str:
    """The error's kind and message on one line, the kind once (not "interrupted: interrupted by SIGTERM")."""
    kind, message = str(error.get("kind") or ""), str(error.get("message") or "")
    return (message if message.startswith(kind) else f"{kind}: {message}")[:500]


def run(sweep_dir: Path, executor: Executor, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every cell still to do; returns the final index. Raises SweepInterrupted on Ctrl-C."""
    with locked(sweep_dir):
        index = load_index(sweep_dir)  # under the lock: the latest state, not what a previous holder saw
        request = stored_request(sweep_dir, index)
        todo = [cell for cell in index["cells"] if cell["status"] in TO_RUN]
        index["status"] = RUNNING
        workloads: dict[str, Any] = {}
        current = None
        try:
            for number, cell in enumerate(todo, 1):
                current = cell
                if cell["record"]:
                    cell["previous_records"].append(cell["record"])
                cell.update(status=RUNNING, record=None, reason=None, error=None, started_at=utc_now(), ended_at=None)
                save_index(sweep_dir, index)
                echo(f"[{number}/{len(todo)}] {cell['id']}: {cell_label(cell)} repeat {cell['repeat']}")
                try:
                    spec = build_spec(request, cell, sweep_dir, workloads)
                except RLBenchError as exc:  # e.g. a workload file removed before a resume
                    result = RunResult(
                        CellStatus.FAILED, None, failure("launch_error", str(exc)), {"kind": executor.kind}
                    )
                else:
                    result = executor.run(spec, run_args(request, cell), echo)
                _finish_cell(cell, result)
                current = None
                save_index(sweep_dir, index)
                if result.status == INTERRUPTED:
                    raise KeyboardInterrupt
            index["status"] = "finished"
        except KeyboardInterrupt as exc:
            if current is not None and current["status"] == RUNNING:
                how = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"  # never call a `kill` a Ctrl-C
                current.update(
                    status=INTERRUPTED, reason=f"interrupted: {how} before the run started", ended_at=utc_now()
                )
            index["status"] = CellStatus.INTERRUPTED
            raise SweepInterrupted(
                f"sweep interrupted; finished records are kept; continue with: rlbench sweep --resume {sweep_dir}"
            ) from None
        finally:
            index["groups"] = group_spread(index["cells"], *_summaries(sweep_dir, index["cells"]))
            save_index(sweep_dir, index)
    return index


def _summaries(
    sweep_dir: Path, cells: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each succeeded cell's record summary, and its time to target where its workload has a target."""
    summaries, targets = {}, {}
    for cell in cells:
        if cell["status"] == SUCCEEDED and cell["record"]:
            try:
                record = read_record(sweep_dir / cell["record"])
            except RLBenchError:  # a damaged or removed record has no spread to give; the index still names it
                continue
            summaries[cell["id"]] = record.get("summary") or {}
            if isinstance(record.get("target"), dict):
                targets[cell["id"]] = record["target"]
    return summaries, targets


def record_dirs(sweep_dir: Path, index: dict[str, Any]) -> list[Path]:
    """Record folders of the sweep's latest attempt of each cell (succeeded and failed)."""
    return [sweep_dir / cell["record"] for cell in index["cells"] if cell["record"]]


def final_report(sweep_dir: Path, index: dict[str, Any], echo: Callable[[str], None]) -> Path | None:
    """`DIR/report.html`: the comparison report (`rlbench.reports.html`) of the sweep's records; never fails
    the sweep."""
    # The one place a sweep renders its comparison report (`rlbench report` over the sweep's records).
    records = record_dirs(sweep_dir, index)
    if not records:
        return None
    from rlbench.reports.html import render_report

    not_run = [
        {
            "label": " ".join([cell["framework"], cell["workload"], *knob_pairs(cell.get("parallel") or {})]),
            "status": cell["status"],
            "reason": cell.get("reason") or "",
        }
        for cell in index["cells"]
        if not cell.get("record") and cell.get("status") == CellStatus.REFUSED
    ]
    try:
        return render_report(records, sweep_dir / "report.html", not_run=not_run)
    except Exception as exc:  # the records and the index are the results; a report bug must not lose them
        echo(f"warning: the comparison report failed ({type(exc).__name__}: {exc}); the records are intact")
        return None
