"""Phases 3 and 4 of a run, launch and watch: the inputs staged on a cluster's nodes, the framework started with
rlbench's sampler beside it, and watched (progress, heartbeat, quality target) until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from rlbench.harness.errors import RLBenchError
from rlbench.harness.run import profiling
from rlbench.harness.run.failure_cause import LOG_FILE, oom_kill_count
from rlbench.harness.run.framework_process import Outcome, launch
from rlbench.harness.run.prepare import Prepared
from rlbench.harness.run.progress import ProgressPrinter, target_watch, with_heartbeat
from rlbench.harness.run.resolve import Resolved
from rlbench.harness.run.stop_signals import StopSignals
from rlbench.harness.spec.runspec import RunSpec


@dataclass(slots=True)
class Watched:
    """How the framework's process ended, and what the runner spent around it."""

    outcome: Outcome
    setup_s: float  # from the run's start to the framework's launch
    parent_cpu_s: float = 0.0  # the runner's own CPU while the framework ran
    oom_kills_before: int | None = None  # the kernel's OOM-kill count at launch (failure_cause)
    samplers: list[Any] = field(default_factory=list)  # the telemetry sampler's handle, where it started

    @classmethod
    def stopped(cls, signum: int, setup_s: float) -> Watched:
        """A stop signal after the record was written but before the framework ran."""
        return cls(Outcome(None, "interrupted", 0.0, signum), setup_s)

    @property
    def sampler(self) -> Any:
        return next((h for h in self.samplers if h is not None), None)


def launch_and_watch(
    spec: RunSpec,
    resolved: Resolved,
    run: Prepared,
    stops: StopSignals,
    echo: Callable[[str], None],
    started: float,
) -> Watched:
    """Stage, launch and watch; returns when the framework's process group is gone (framework_process.launch)."""
    adapter, cluster, run_dir = resolved.adapter, resolved.cluster, run.run_dir
    if cluster is not None:
        cluster.stage_run(adapter, spec, resolved.inputs, run_dir)
        if profiling.sample_hz() > 0:  # RLBENCH_SAMPLE_HZ=0 turns every node's sampling off too
            cluster.start_sampling(run_dir, profiling.sample_hz())
    watched = Watched(Outcome(None, None, 0.0), time.perf_counter() - started)
    echo(
        f"run {run_dir.name}: {adapter.name} {adapter.version()} on {spec.workload.name}, "
        f"{spec.workload.steps} steps (log: {run_dir / LOG_FILE})"
    )
    parent = psutil.Process()
    cpu_before = sum(parent.cpu_times()[:2])
    gpus = bool(resolved.environment["gpu_count"])
    printer = ProgressPrinter(adapter, run_dir, spec.workload.steps, resolved.environment["gpu_count"], echo)
    watched.oom_kills_before = oom_kill_count()
    run.record.launched(time.time())
    watched.outcome = launch(
        run.plan,
        run_dir,
        spec.timeout_s,
        with_heartbeat(printer, run_dir, cluster.poll if cluster is not None else None),
        stops,
        on_start=lambda pid: watched.samplers.append(_start_sampler(run_dir, pid, echo, cluster is not None, gpus)),
        reached=target_watch(spec, printer, echo),
    )
    watched.parent_cpu_s = sum(parent.cpu_times()[:2]) - cpu_before
    return watched


def _start_sampler(run_dir: Path, pid: int, echo: Callable[[str], None], on_cluster: bool, gpus: bool) -> Any:
    """Telemetry is an addition to the run, not a condition for it: if the sampler cannot start (the
    framework already exited, no room for its files), the run goes on and the record says why. On a cluster
    it samples the driver's process tree (the node agents sample the nodes and their GPUs)."""
    try:
        return profiling.start(run_dir, pid, on_cluster=on_cluster, gpus=gpus)
    except (RLBenchError, ValueError, OSError) as exc:
        echo(f"warning: no telemetry for this run: {exc}")
        return None
