"""The framework's process: launched in a session of its own, watched, and stopped as a whole tree.

`launch` starts the framework's command with its output in `framework.log`, polls
it (progress, heartbeat) until it exits or runs past its timeout, and stops its
whole process group (plus descendants that left it) on a stop signal, a timeout,
or when the leader exits and leaves workers behind. It returns an `Outcome`; the
runner turns that into the record.

    python -c "from rlbench.harness.run.framework_process import launch; help(launch)"
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from rlbench.adapters.base import LaunchPlan
from rlbench.harness.run.failure_cause import LOG_FILE
from rlbench.harness.run.stop_signals import RunStop, StopSignals

POLL_S = 0.5
GRACEFUL_STOP_S, KILL_WAIT_S = 10.0, 5.0


@dataclass(slots=True)
class Outcome:
    returncode: int | None
    kind: str | None  # None on success, else a run_record.ERROR_KINDS key
    wall_s: float
    signum: int | None = None  # the stop signal of an interrupted run
    at_target: bool = False  # rlbench stopped the framework because the workload's quality target was reached


def _group_alive(pgid: int, tree: list[psutil.Process]) -> bool:
    """Any live (non-zombie) process left in the framework's group or its tree as it was at stop time.
    Zombies are ignored: inside a container PID 1 may never reap orphans, and they hold nothing."""
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    for proc in tree:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False


def _stop(process: subprocess.Popen, hurry: Callable[[], bool] = lambda: False) -> None:
    """Stop the framework's whole process tree: its process group (it leads its own session), and also
    the descendants that left the group (Ray starts workers in sessions of their own). SIGTERM first,
    SIGKILL after GRACEFUL_STOP_S, or at once when `hurry()` (a second Ctrl-C)."""
    try:
        tree = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    for sig, wait_s in ((signal.SIGTERM, GRACEFUL_STOP_S), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in tree:
            try:
                proc.send_signal(sig)  # psutil refuses a PID that was reused meanwhile
            except psutil.Error:
                continue
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or it stays a zombie in its group
            if not _group_alive(process.pid, tree):
                return
            if sig == signal.SIGTERM and hurry():
                break
            time.sleep(0.1)
    process.poll()


def _guarded(on_poll: Callable[[], None]) -> None:
    """Progress is cosmetic: a metrics line the framework is still writing (half a JSON line) or a file
    it is rotating must not end the run or orphan the framework."""
    try:
        on_poll()
    except (OSError, ValueError, KeyError):
        pass


def launch(
    plan: LaunchPlan,
    run_dir: Path,
    timeout_s: float,
    on_poll: Callable[[], None],
    stops: StopSignals,
    on_start: Callable[[int], None] = lambda pid: None,
    reached: Callable[[], bool] = lambda: False,
) -> Outcome:
    """Run the plan to its end; `reached()` is asked after each poll and, when true (a quality target that
    ends the run was reached), the framework is stopped and the outcome is a success."""
    env = {**os.environ, **plan.env}
    start = time.perf_counter()
    with (run_dir / LOG_FILE).open("wb") as log:
        try:
            with stops.deferred():  # a signal inside fork/exec would lose the child's handle: raise it after
                process = subprocess.Popen(
                    plan.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=run_dir,
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                )
        except OSError as exc:
            log.write(f"launch failed: {exc}\n".encode())
            return Outcome(None, "launch_error", 0.0)
        except RunStop as stop:
            _stop(process, stops.hurry)
            return Outcome(process.returncode, "interrupted", time.perf_counter() - start, stop.signum)
        try:
            on_start(process.pid)  # inside the try: a signal while the sampler starts still stops the framework
            while process.poll() is None:
                if time.perf_counter() - start > timeout_s:
                    _stop(process, stops.hurry)
                    stops.hold()
                    return Outcome(process.returncode, "timeout", time.perf_counter() - start)
                _guarded(on_poll)
                if reached():
                    _stop(process, stops.hurry)
                    stops.hold()
                    return Outcome(process.returncode, None, time.perf_counter() - start, at_target=True)
                time.sleep(POLL_S)
            stops.hold()  # still inside the try: a signal up to here counts as an interruption, none after
            if _group_alive(process.pid, []):  # the leader is gone; its workers must not outlive the run
                _stop(process, stops.hurry)
        except RunStop as stop:
            stops.hold()
            _stop(process, stops.hurry)
            return Outcome(process.returncode, "interrupted", time.perf_counter() - start, stop.signum)
        except BaseException:  # a bug in rlbench: never leave the framework running without us
            _stop(process, stops.hurry)
            raise
    wall = time.perf_counter() - start
    _guarded(on_poll)
    return Outcome(0, None, wall) if process.returncode == 0 else Outcome(process.returncode, "framework_error", wall)
