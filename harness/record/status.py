"""The states a run, a sweep cell and a night can be in: three types, one per thing that has a state.

Each is a str, so records, sweep indexes and nights keep plain strings on disk and a state read back compares
equal to its member (`RunStatus("failed") is RunStatus.FAILED`, `"failed" == RunStatus.FAILED`). The types share
words where the things share a state (a cell whose run failed is `failed`), never a member: a run cannot be
`refused` and a night cannot be `pending`.
"""

from __future__ import annotations

from enum import Enum


class _State(str, Enum):
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class RunStatus(_State):
    """run.json's `status`."""

    RUNNING = "running"  # the runner is working; then one of the terminal states
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    # never written: a "running" record whose runner is gone (record.store.effective_status)
    ABANDONED = "abandoned"


class CellStatus(_State):
    """A sweep cell's `status` in sweep.json. `failed` and `refused` are finished results: resume keeps them."""

    PENDING = "pending"  # not started yet
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REFUSED = "refused"  # refused before launch
    INTERRUPTED = "interrupted"


class NightStatus(_State):
    """A night's `status` (nightly.json), and each of its benchmarks' (`benchmarks[].status`)."""

    RUNNING = "running"
    PASSED = "passed"  # every benchmark ran and none regressed
    REGRESSED = "regressed"  # a metric significantly worse than its baseline
    UNDECIDABLE = "undecidable"  # comparisons with too few steps to decide
    FAILED = "failed"  # a benchmark failed (the night), or its run did (a benchmark)
    INTERRUPTED = "interrupted"
    SUCCEEDED = "succeeded"  # a benchmark whose run succeeded
    NOT_RUN = "not run"  # a benchmark refused before launch


STATUSES = (RunStatus.RUNNING, RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.INTERRUPTED)  # what run.json holds
TERMINAL_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.INTERRUPTED)
