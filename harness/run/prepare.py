"""Phase 2 of a run, prepare: the run folder, the framework's exact launch, and run.json ("running").

After `prepare` returns, the run has a record on disk and ends in a terminal status whatever happens; if it
fails or is stopped before that, its half-made folder is removed (no record at all, never half of one).
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path

from rlbench.adapters.base import LaunchPlan
from rlbench.harness.cluster.worker_env import cluster_env
from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.run_record import FrameworkIdentity, RecordBuilder, RunRecord
from rlbench.harness.record.status import RunStatus
from rlbench.harness.record.store import new_run_dir, runner_identity, utc_now
from rlbench.harness.run import profiling
from rlbench.harness.run.resolve import Resolved
from rlbench.harness.spec.environment import rlbench_identity
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE, write_prompts


@dataclass(slots=True)
class Prepared:
    """A run with a record: its folder, its launch, and the builder of its run.json."""

    run_dir: Path
    plan: LaunchPlan
    record: RecordBuilder


def prepare(spec: RunSpec, resolved: Resolved) -> Prepared:
    run_dir = _new_run_dir(spec)
    try:
        plan = _launch_plan(spec, resolved, run_dir)
        record = RecordBuilder(_start_fields(spec, resolved, run_dir, plan))
        if resolved.cluster is not None:
            record.joined_cluster(resolved.cluster.describe(resolved.adapter.cluster_placement))
        _write_start(run_dir, record, resolved, plan)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # a half-made folder without a run.json: no record
        raise
    return Prepared(run_dir, plan, record)


def _launch_plan(spec: RunSpec, resolved: Resolved, run_dir: Path) -> LaunchPlan:
    """The adapter's plan, with rlbench's profiling environment; on a cluster the driver joins it and hands the
    run's environment to its workers."""
    plan = resolved.adapter.plan(spec, resolved.inputs, run_dir)
    plan = dataclasses.replace(plan, env={**plan.env, **profiling.framework_env(run_dir)})
    if resolved.cluster is not None:
        plan = dataclasses.replace(plan, env=cluster_env(plan.env, resolved.cluster.address))
    return plan


def _start_fields(spec: RunSpec, resolved: Resolved, run_dir: Path, plan: LaunchPlan) -> RunRecord:
    adapter = resolved.adapter
    return RunRecord(
        run_id=run_dir.name,
        status=RunStatus.RUNNING,
        error=None,
        framework=FrameworkIdentity(name=adapter.name, version=adapter.version(), tested=adapter.version_is_tested()),
        workload=dataclasses.asdict(spec.workload),
        parallel=spec.parallel.to_dict(),
        seed=spec.seed,
        timeout_s=spec.timeout_s,
        model_path=resolved.inputs.model,
        data=resolved.inputs.data,
        cpu_lane=adapter.lane(spec),
        equal_work=adapter.equal_work(spec),
        command=plan.argv,
        rlbench=rlbench_identity(),
        runner=runner_identity(),
        environment=resolved.environment,
        started_at=utc_now(),
        ended_at=None,
    )


def _new_run_dir(spec: RunSpec) -> Path:
    try:
        return new_run_dir(spec.out, spec.framework, spec.workload.name)
    except OSError as exc:
        raise RLBenchError(
            f"--out {spec.out}: cannot create a run folder there ({exc.strerror or exc}); choose a writable folder"
        ) from None


def _write_start(run_dir: Path, record: RecordBuilder, resolved: Resolved, plan: LaunchPlan) -> None:
    """run.json ("running") and the framework's input files; if the disk refuses them, no record at all."""
    inputs = resolved.inputs
    try:
        record.write(run_dir)
        write_prompts(inputs.prompts, run_dir / "prompts.jsonl")
        if inputs.eval_prompts:  # an eval_accuracy target's held-out problems
            write_prompts(inputs.eval_prompts, run_dir / EVAL_PROMPTS_FILE)
        for name, content in plan.files.items():
            (run_dir / name).write_text(content)
    except OSError as exc:
        raise RLBenchError(
            f"cannot write the run record in {run_dir.parent} ({exc.strerror or exc}); "
            "free some space or choose another --out"
        ) from None
