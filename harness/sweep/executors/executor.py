"""What every executor gives back for a run (`RunResult`), the protocol executors follow, and how a stop reaches
a run: shared by the executors (local.py, environments.py, ray_executor.py) and the sweep's driver."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from rlbench.harness.record.read import read_run_json
from rlbench.harness.record.status import RunStatus
from rlbench.harness.spec.runspec import RunSpec


@dataclass(slots=True)
class RunResult:
    status: Literal[RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.INTERRUPTED]
    record: Path | None  # the record folder in the sweep folder, None when nothing was recorded
    error: dict[str, Any] | None = None  # {kind, message, log_tail}, as in run.json
    executor: dict[str, Any] = field(default_factory=dict)  # {kind, ...} kept in the cell


class Executor(Protocol):
    kind: str

    def check(self, spec: RunSpec, run_args: list[str] | None = None) -> None:
        """Raise RLBenchError when this run (`rlbench run *run_args`) would be refused (before anything runs)."""

    def run(self, spec: RunSpec, run_args: list[str], echo: Callable[[str], None]) -> RunResult:
        """Run `spec` (the same run as `rlbench run *run_args`) with its record folder under `spec.out`.

        Ctrl-C stops the run and gives an interrupted result; no failure of the run raises."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as the Ctrl-C every stop path handles; its type lets a message name the real signal."""


def sigterm_as_ctrl_c() -> None:
    """Make SIGTERM (`kill`, `ray job stop`, a batch system's time limit) stop a run as Ctrl-C does:
    the runner then stops the framework's process group and writes the record."""

    def handler(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop is enough; let the record be written
        raise Terminated

    signal.signal(signal.SIGTERM, handler)


def failure(kind: str, message: str, log_tail: list[str] | None = None) -> dict[str, Any]:
    """An error entry in run.json's shape, for failures that left no record."""
    return {"kind": kind, "message": message, "log_tail": log_tail or []}


def result_from_record(run_dir: Path | None, status: str, executor: dict[str, Any]) -> RunResult:
    """A RunResult carrying the error the runner wrote into the record."""
    if run_dir is None:  # the runner records before it raises; keep going if that ever fails
        return RunResult(status, None, failure("launch_error", "the run left no record"), executor)  # type: ignore[arg-type]
    record = read_run_json(run_dir)
    error = record.get("error") or (
        failure("interrupted", "interrupted before the framework started") if status == RunStatus.INTERRUPTED else None
    )
    return RunResult(status, run_dir, error, executor)  # type: ignore[arg-type]
