"""The local executor: each run of a sweep on this machine, one after another, through the runner.

The runner already records every failure (timeout, OOM, framework error) and
Ctrl-C in the run's own `run.json`; this executor turns that record into a
`RunResult` and turns the errors that happen before a record exists (missing
data, a framework that cannot start here) into launch errors, so the sweep goes on.

    rlbench sweep --framework trl --workload gsm8k-grpo-tiny --steps 2 --grid placement=colocated,disaggregated
"""

from __future__ import annotations

import dataclasses
import os
import signal
import traceback
from collections.abc import Callable
from pathlib import Path

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.read import read_run_json
from rlbench.harness.record.run_record import write_run_json
from rlbench.harness.record.status import RunStatus
from rlbench.harness.record.store import RUN_FILE, utc_now
from rlbench.harness.spec.runspec import RunSpec, check_ray_address
from rlbench.harness.sweep.executors.executor import RunResult, failure, result_from_record


def _run_dirs(out: Path) -> set[Path]:
    return {p for p in out.iterdir() if (p / RUN_FILE).is_file()} if out.is_dir() else set()


def _stop_own_framework() -> None:
    """Stop framework processes this process started: each leads its own session (runner.launch), so
    its group is signalled; other children (in our own group) get a plain terminate, never a killpg."""
    import psutil

    children = psutil.Process().children()
    for child in children:
        try:
            if os.getpgid(child.pid) == child.pid:
                os.killpg(child.pid, signal.SIGTERM)
            else:
                child.terminate()
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        child.kill()


def _settle_interrupted(run_dir: Path) -> None:
    """A Ctrl-C that lands while the framework is being started escapes the runner's own handling and
    leaves run.json saying "running" (and possibly the framework alive): stop it and say what happened."""
    from rlbench.harness.run.failure_cause import log_tail

    record = read_run_json(run_dir)
    if record.get("status") != RunStatus.RUNNING:
        return
    _stop_own_framework()
    record.update(
        status=RunStatus.INTERRUPTED,
        ended_at=utc_now(),
        error=failure(
            "interrupted", "interrupted by the user (Ctrl-C) while the framework was starting", log_tail(run_dir)
        ),
    )
    write_run_json(run_dir, record)


class LocalExecutor:
    kind = "local"

    def check(self, spec: RunSpec, run_args: list[str] | None = None) -> None:
        adapter = get_adapter(spec.framework)
        adapter.check(spec)
        adapter.check_machine()

    def run(self, spec: RunSpec, run_args: list[str], echo: Callable[[str], None]) -> RunResult:
        from rlbench.harness.run.exceptions import RunFailed, RunInterrupted
        from rlbench.harness.run.runner import execute

        executor = {"kind": self.kind}
        before = _run_dirs(spec.out)
        if os.environ.get("RAY_ADDRESS") and spec.ray_address is None:  # as `rlbench run` reads it: join that cluster
            spec = dataclasses.replace(spec, ray_address=check_ray_address(os.environ["RAY_ADDRESS"]))

        def new_record() -> Path | None:
            # This sweep holds the folder's lock, so a new record folder is this run's.
            created = sorted(_run_dirs(spec.out) - before)
            return created[-1] if created else None

        try:
            return RunResult(RunStatus.SUCCEEDED, execute(spec, echo=echo), None, executor)
        except RunFailed as exc:
            return result_from_record(exc.run_dir, RunStatus.FAILED, executor)
        except (RunInterrupted, KeyboardInterrupt):
            run_dir = new_record()
            if run_dir is None:
                return RunResult(
                    RunStatus.INTERRUPTED, None, failure("interrupted", "interrupted before the run started"), executor
                )
            _settle_interrupted(run_dir)
            return result_from_record(run_dir, RunStatus.INTERRUPTED, executor)
        except RLBenchError as exc:  # before launch: data, tokenizer, machine
            return RunResult(RunStatus.FAILED, new_record(), failure("launch_error", str(exc)), executor)
        except Exception as exc:  # a bug in rlbench must not end the whole sweep; keep its traceback
            lines = traceback.format_exc().splitlines()[-30:]
            return RunResult(
                RunStatus.FAILED,
                new_record(),
                failure("launch_error", f"rlbench internal error: {type(exc).__name__}: {exc}", lines),
                executor,
            )
