"""Run one benchmark, as five phases over one record: resolve, prepare, launch and watch, finish.

    resolve   refuse what cannot run, join the cluster, make the inputs       (resolve.py)
    prepare   the run folder, the framework's exact launch, run.json running  (prepare.py)
    watch     stage on the nodes, launch the framework, watch it to its end   (watch.py)
    finish    read back, judge, write the record's files, end run.json        (finish.py)

This module only sequences them and owns what crosses them: the stop signals (stop_signals.py), held from the
moment the framework has ended so that the record is written whatever comes, and the rule that a run stopped
or refused before `prepare` returns leaves no record and no cluster behind. The framework runs as its own
process group with a timeout (framework_process.py); run.json is written (atomically) when the run starts and
again when it ends, so a crash, a timeout, a stop signal or a full disk still leaves a record that says what
happened.

    rlbench run --framework trl --workload gsm8k-grpo-tiny --steps 3
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from rlbench.adapters.registry import get_adapter
from rlbench.harness.cluster.worker_env import cluster_env
from rlbench.harness.run.exceptions import RunInterrupted
from rlbench.harness.run.finish import finish
from rlbench.harness.run.prepare import Prepared, prepare
from rlbench.harness.run.progress import quiet
from rlbench.harness.run.resolve import Resolved, resolve
from rlbench.harness.run.stop_signals import RunStop, StopSignals, describe, stop_signals
from rlbench.harness.run.watch import Watched, launch_and_watch
from rlbench.harness.spec.inputs import prepare_inputs
from rlbench.harness.spec.runspec import RunSpec


def execute(spec: RunSpec, *, echo: Callable[[str], None] = print) -> Path:
    """Run `spec` for real and return its record folder; raises RunFailed / RunInterrupted after recording."""
    with stop_signals() as stops:
        return _execute(spec, quiet(echo), stops)


def _execute(spec: RunSpec, echo: Callable[[str], None], stops: StopSignals) -> Path:
    started = time.perf_counter()
    resolved: Resolved | None = None
    run: Prepared | None = None
    try:
        resolved = resolve(spec, echo)
        run = prepare(spec, resolved)
        watched = launch_and_watch(spec, resolved, run, stops, echo, started)
    except RunStop as stop:
        if run is None:
            _leave_cluster(resolved)
            raise RunInterrupted(
                f"interrupted by {describe(stop.signum)} before the framework started; nothing was recorded",
                stop.signum,
            ) from None
        watched = Watched.stopped(stop.signum, time.perf_counter() - started)
    except BaseException:
        if run is None:
            _leave_cluster(resolved)  # refused before launch: leave the cluster as found
        raise
    stops.hold()  # from here every signal is only noted: the record is written whatever comes
    assert resolved is not None  # prepare ran, so resolve did
    return finish(spec, resolved, run, watched)


def _leave_cluster(resolved: Resolved | None) -> None:
    if resolved is not None and resolved.cluster is not None:
        resolved.cluster.close()


def dry_run(spec: RunSpec, *, echo: Callable[[str], None] = print) -> str:
    """The exact launch that `execute` would make, as text; nothing is run or recorded. It plans on any machine:
    the GPU launch where this one cannot run `spec`, and what cannot be resolved here (a tokenizer offline)
    left out, each said in one `note:` line through `echo`."""
    adapter, what = get_adapter(spec.framework).dry_run_planner(spec)
    adapter.check(spec)
    if what:
        echo(f"note: {what}")
    inputs = prepare_inputs(spec.workload, spec.seed, note=lambda line: echo(f"note: {line}"))
    plan = adapter.plan(spec, inputs, spec.out / "<run_id>")
    if spec.ray_address:  # as execute adds it: the framework's driver joins that cluster
        plan = dataclasses.replace(plan, env=cluster_env(plan.env, spec.ray_address))
    return plan.describe()
