"""Phase 5 of a run, finish: read back what the framework logged and rlbench sampled, judge it (quality target,
the model's prediction, physical limits, prices), write the record's files, and end run.json in a terminal
status. Every step here that can fail costs its own figure or file, never the record; the outcome then reaches
the caller as the run's exception (exceptions.py), after the record is on disk."""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from rlbench.harness import settings
from rlbench.harness.errors import RLBenchError
from rlbench.harness.predict.run_prediction import measured_vs_predicted
from rlbench.harness.record.plausibility import data_errors
from rlbench.harness.record.schema import PREDICTION_FILE, SPANS_FILE, STEPS_FILE
from rlbench.harness.record.status import RunStatus
from rlbench.harness.record.store import summarize, utc_now, write_json, write_spans, write_steps
from rlbench.harness.record.time_to_target import price_target, time_to_target
from rlbench.harness.run import profiling
from rlbench.harness.run.derive import (
    derive_step_metrics,
    model_flops_utilisation,
    response_lengths,
    time_to_first_step,
    weight_sync_rate,
)
from rlbench.harness.run.exceptions import RunFailed, RunInterrupted
from rlbench.harness.run.failure_cause import LOG_FILE, run_error
from rlbench.harness.run.job_prediction import gpu_price, job_machine, run_prediction
from rlbench.harness.run.overhead import overhead
from rlbench.harness.run.prepare import Prepared
from rlbench.harness.run.resolve import Resolved
from rlbench.harness.run.step_stamps import apply_stamps
from rlbench.harness.run.stop_signals import describe
from rlbench.harness.run.watch import Watched
from rlbench.harness.spec.evaluation import evaluation_contract
from rlbench.harness.spec.runspec import RunSpec


def finish(spec: RunSpec, resolved: Resolved, run: Prepared, watched: Watched) -> Path:
    """End the run's record and return its folder; raise the run's exception where it did not succeed."""
    began = time.perf_counter()
    record, run_dir, outcome = run.record, run.run_dir, watched.outcome
    if resolved.cluster is not None:
        stop = watched.sampler.stop if watched.sampler is not None else None
        record.left_cluster(**resolved.cluster.finish_run(run_dir, run_dir / profiling.TELEMETRY_FILE, stop))
    machine = job_machine(resolved.environment, record.record.get("cluster"), resolved.adapter.job_gpus(spec))
    write_errors: list[str] = []
    steps, prediction = _read_back(spec, resolved, run, watched, machine, write_errors)
    if outcome.kind is None and len(steps) < spec.workload.steps and not outcome.at_target:
        outcome.kind = "framework_error"
    _judge(spec, resolved, run, watched, steps, prediction, machine, write_errors)
    error = run_error(
        outcome.kind,
        outcome.returncode,
        outcome.signum,
        run_dir,
        watched.oom_kills_before,
        run_dir / profiling.TELEMETRY_FILE,
    )
    if write_errors and error is None:
        error = {"kind": "record_error", "message": f"could not write {'; '.join(write_errors)}", "log_tail": []}
    status = (
        RunStatus.SUCCEEDED
        if error is None
        else (RunStatus.INTERRUPTED if outcome.kind == "interrupted" else RunStatus.FAILED)
    )
    record.ended(
        status=status,
        error=error,
        returncode=outcome.returncode,
        duration_s=outcome.wall_s,
        ended_at=utc_now(),
        files=_files(run_dir),
        record_errors=write_errors,
    )
    record.cost_of_recording(
        overhead(
            watched.setup_s,
            watched.parent_cpu_s,
            steps,
            outcome.wall_s,
            time.perf_counter() - began,
            record.record.get("telemetry"),
            resolved.environment.get("cpu_count"),
        )
    )
    record.write_end(run_dir)
    _raise_outcome(run, watched, len(steps), write_errors)
    return run_dir


def _read_back(
    spec: RunSpec, resolved: Resolved, run: Prepared, watched: Watched, machine: dict[str, Any], errors: list[str]
) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The framework's steps in rlbench's vocabulary, with telemetry and NCCL figures joined and the model's
    prediction for the run's exact work (MFU and the weight-sync rate need it), into the record."""
    adapter, run_dir, record = resolved.adapter, run.run_dir, run.record
    try:
        steps = adapter.read_steps(run_dir)
    except (OSError, ValueError, KeyError) as exc:  # a damaged metrics file must not cost the record
        steps = pd.DataFrame()
        record.note(f"could not read the framework's metrics: {type(exc).__name__}: {exc}")
    steps, stand_in = apply_stamps(steps, run_dir)  # one step-time definition; verl's missing boundaries
    steps, own_timer = derive_step_metrics(steps, machine["gpu_count"])
    for line in (stand_in, own_timer):
        if line:
            record.note(line)
    try:
        steps, telemetry = profiling.add_telemetry(run_dir, watched.sampler, steps)
    except (OSError, ValueError) as exc:
        telemetry = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        comm = profiling.add_comm(run_dir, steps)
    except (OSError, ValueError) as exc:
        comm = None
        errors.append(f"comm.parquet: {exc}")
    prediction = None
    if not steps.empty:
        prediction = run_prediction(spec, adapter, resolved.inputs.model, machine, steps)
        steps["mfu"] = model_flops_utilisation(steps, prediction)  # rlbench's, the same for every framework
        steps["weight_sync_gb_per_s"] = weight_sync_rate(steps, prediction)
    record.measured(
        steps_recorded=len(steps),
        summary=summarize(steps, spec.workload.warmup_steps) if not steps.empty else {},
        telemetry=telemetry,
        comm=comm,
        equal_work=adapter.equal_work(spec, run_dir),  # now with what the framework itself resolved
        time_to_first_step_s=time_to_first_step(record.record.get("launched_unix_s"), steps),
        response_lengths=response_lengths(steps, spec.workload),
        async_roles=_roles(spec, resolved, run, len(steps)),
        profile=(
            profiling.profile_record(run_dir, spec.profile, steps, spec.workload.warmup_steps)
            if spec.profile is not None
            else None
        ),
    )
    return steps, prediction


def _judge(
    spec: RunSpec,
    resolved: Resolved,
    run: Prepared,
    watched: Watched,
    steps: pd.DataFrame,
    prediction: dict[str, Any] | None,
    machine: dict[str, Any],
    errors: list[str],
) -> None:
    """The run against its target, the model's prediction and physical limits, priced; its step files written."""
    record, run_dir = run.record, run.run_dir
    gpus = spec.parallel.world_size if machine["gpus"] else 0
    target = _target(spec, resolved, run, watched, steps, machine, gpus)
    if steps.empty or prediction is None:
        record.judged(target=target)
        return
    _write_or_note(errors, STEPS_FILE, lambda: write_steps(run_dir, steps))
    _write_spans(resolved, run, errors)
    _write_or_note(errors, PREDICTION_FILE, lambda: write_json(run_dir / PREDICTION_FILE, prediction))
    summary = record.record["summary"]
    record.judged(
        target=target,
        vs_model=measured_vs_predicted(summary, prediction),
        costs=profiling.costs(summary, steps, gpus, gpu_price(machine)),
        data_errors=data_errors(record.record, steps),  # a figure no machine could produce: named, never compared
    )


def _target(
    spec: RunSpec,
    resolved: Resolved,
    run: Prepared,
    watched: Watched,
    steps: pd.DataFrame,
    machine: dict[str, Any],
    gpus: int,
) -> dict[str, Any] | None:
    """run.json's `target`: time to the workload's quality target, priced, with how its held-out evaluation ran."""
    if spec.workload.target is None:
        return None
    found = time_to_target(
        steps, dataclasses.asdict(spec.workload.target), run.record.record.get("launched_unix_s"), gpus
    )
    found["stopped_at_target"] = watched.outcome.at_target
    price = settings.gpu_hour_usd(gpu_price(machine))  # the price `costs` uses
    found.update(price_target(found, price, settings.kwh_usd()))
    held_out = evaluation_contract(spec.workload)
    if held_out is not None:  # how the held-out evaluation ran: the shared contract and this framework's hook
        found["evaluation"] = {**held_out, **(resolved.adapter.evaluation(spec) or {})}
    return found


def _roles(spec: RunSpec, resolved: Resolved, run: Prepared, steps: int) -> dict[str, Any] | None:
    w = spec.workload
    try:
        return resolved.adapter.read_roles(run.run_dir, w.prompts_per_step * w.algorithm.group_size, steps)
    except (OSError, ValueError, KeyError) as exc:  # a damaged trace costs this section, not the record
        run.record.note(f"could not read the framework's per-role spans: {exc}")
        return None


def _write_spans(resolved: Resolved, run: Prepared, errors: list[str]) -> None:
    try:
        spans = resolved.adapter.read_spans(run.run_dir)
    except (OSError, ValueError, KeyError) as exc:  # a damaged log must not cost the record
        spans = None  # the stages are then placed end to end, as for a framework that logs durations only
        run.record.note(f"could not read the framework's stage spans: {exc}")
    if spans is not None and not spans.empty:
        _write_or_note(errors, SPANS_FILE, lambda: write_spans(run.run_dir, spans))


def _write_or_note(errors: list[str], name: str, write: Callable[[], None]) -> None:
    """A full disk or a read-only filesystem loses this file, not the rest of the record."""
    try:
        write()
    except OSError as exc:
        errors.append(f"{name}: {exc.strerror or exc}")


def _files(run_dir: Path) -> list[str]:
    try:
        return sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


def _raise_outcome(run: Prepared, watched: Watched, steps_recorded: int, write_errors: list[str]) -> None:
    """The run's end as its caller sees it: nothing for a succeeded run, else its exception, one line."""
    run_dir, outcome, record = run.run_dir, watched.outcome, run.record.record
    kept = f"{steps_recorded} step(s) recorded in {run_dir}"
    if outcome.kind == "interrupted":
        signum = outcome.signum or signal.SIGINT
        raise RunInterrupted(
            f"interrupted by {describe(signum)}; the framework was stopped and the partial record is kept: {kept}",
            signum,
        )
    error = record["error"]
    if write_errors:
        raise RLBenchError(
            f"the run ended but its record is incomplete: could not write {write_errors[0]}; "
            f"run.json says {record['status']} ({error['kind'] if error else 'record_error'}); "
            "free some space and run again"
        )
    if error is not None:
        raise RunFailed(
            f"run failed ({error['kind']}): {error['message'][:300]}; record: {run_dir}, "
            f"full log: {run_dir / LOG_FILE}",
            run_dir,
        )
