"""How a run that did not succeed reaches its caller (the CLI, a sweep, a night): after its record is written."""

from __future__ import annotations

import signal
from pathlib import Path

from rlbench.harness.errors import RLBenchError


class RunFailed(RLBenchError):
    """The framework ran and failed; the record folder (`run_dir`) says how."""

    def __init__(self, message: str, run_dir: Path):
        super().__init__(message)
        self.run_dir = run_dir


class RunInterrupted(RLBenchError):
    """SIGINT, SIGTERM or SIGHUP during the run; the record folder is kept with status 'interrupted'."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a process that died of the signal
