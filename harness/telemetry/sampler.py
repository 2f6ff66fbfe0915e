"""Start and stop the telemetry sampler process from the runner.

The runner starts the sampler before the framework and stops it after:

    handle = start_sampler(run_dir / "telemetry.parquet", root_pid=os.getpid(), rate_hz=10)
    ...launch and wait for the framework...
    telemetry_path = handle.stop()   # Path, or None if nothing was recorded

`root_pid` is the root of the process tree whose CPU and memory are measured:
the framework's pid when it is known, or the runner's own pid (the framework is
then one of its children; the sampler leaves itself out of the tree). Host and
GPU readings do not depend on it. The sampler runs as `python -m
rlbench.harness.telemetry.sample_loop`; see that module for what it does and writes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from rlbench.harness.errors import RLBenchError
from rlbench.harness.telemetry.store import combine_parts, journal_file, notes_file


@dataclass
class SamplerHandle:
    """A running sampler; `stop()` ends it and returns the parquet path."""

    process: subprocess.Popen
    out_file: Path

    @property
    def notes_file(self) -> Path:
        return notes_file(self.out_file)

    def running(self) -> bool:
        return self.process.poll() is None

    def notes(self) -> dict[str, Any]:
        """The sidecar: host, GPUs, notes (e.g. NVML unavailable), stop reason, sampler CPU seconds."""
        try:
            return json.loads(self.notes_file.read_text())
        except (OSError, ValueError):
            return {}

    def stop(self, timeout_s: float = 30.0) -> Path | None:
        """Signal the sampler, wait for it to write, and return `out_file` (None if nothing was sampled)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            warnings.warn(
                f"telemetry sampler (pid {self.process.pid}) did not stop in {timeout_s} s; killed it", stacklevel=2
            )
            self.process.kill()
            self.process.wait()
        if self.out_file.exists():
            return self.out_file
        try:
            return combine_parts(self.out_file)  # it died before writing: keep what it journaled
        except OSError:  # no room or read-only: the run's record matters more than its telemetry
            return None

    def __enter__(self) -> SamplerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _clear_stale(out_file: Path) -> None:
    # a notes file left by an earlier run would look like "ready" to the wait below
    for path in (out_file, notes_file(out_file), journal_file(out_file)):
        path.unlink(missing_ok=True)


def start_sampler(
    out_file: Path,
    root_pid: int,
    rate_hz: float = 10.0,
    *,
    devices: Sequence[int] | None = None,
    flush_every_s: float = 60.0,
    env: Mapping[str, str] | None = None,
    ready_timeout_s: float = 20.0,
    stop_orphan: bool = False,
    node: str | None = None,
) -> SamplerHandle:
    """Start the sampler process and wait until it has begun sampling.

    devices: NVML GPU indices to read (default all GPUs NVML sees; NVML ignores
    CUDA_VISIBLE_DEVICES). env: extra environment for the sampler process. stop_orphan: if this
    process dies first, the sampler stops the process group `root_pid` leads (the runner's framework).
    node: the `node` column of its rows (columns.LOCAL_NODE unless a cluster run names the driver's).
    """
    if not 0 < rate_hz <= 1000:
        raise ValueError(f"rate_hz must be in (0, 1000], got {rate_hz}")
    if not psutil.pid_exists(root_pid):
        raise ValueError(f"root_pid {root_pid} is not a running process")
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    _clear_stale(out_file)
    command = [
        sys.executable,
        "-m",
        "rlbench.harness.telemetry.sample_loop",
        "--pid",
        str(root_pid),
        "--out",
        str(out_file),
        "--rate-hz",
        repr(float(rate_hz)),
        "--flush-every-s",
        repr(float(flush_every_s)),
        "--parent-pid",
        str(os.getpid()),
    ]
    if devices is not None:
        command += ["--devices", ",".join(str(d) for d in devices)]
    if stop_orphan:
        command.append("--stop-orphan")
    if node is not None:
        command += ["--node", node]
    # Its own session: a terminal's Ctrl-C (sent to the whole foreground group) must not hit it while it
    # imports (a KeyboardInterrupt traceback); the runner stops it with SIGTERM, and it stops by itself
    # when its parent exits.
    process = subprocess.Popen(
        command, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + ready_timeout_s
    while not notes_file(out_file).exists():
        if process.poll() is not None:
            raise RLBenchError(
                f"the telemetry sampler exited with code {process.returncode} before it started "
                f"(its error is printed above); run without telemetry or fix the error"
            )
        if time.monotonic() > deadline:
            warnings.warn(
                f"telemetry sampler not ready after {ready_timeout_s} s; continuing without waiting", stacklevel=2
            )
            break
        time.sleep(0.02)
    return SamplerHandle(process, out_file)
