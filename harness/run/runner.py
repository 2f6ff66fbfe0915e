"""Run one benchmark: check, prepare inputs, launch the framework, write the record.

The framework runs as its own process group with a timeout (framework_process.py);
its output goes to `framework.log` in the run folder, and its metrics file is
watched for progress. `run.json` is written (atomically) when the run starts and
again when it ends, so a crash, a timeout, a stop signal (stop_signals.py) or a
full disk still leaves a record that says what happened.

    rlbench run --framework trl --workload gsm8k-grpo-tiny --steps 3
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import psutil

from rlbench.adapters.base import Adapter, LaunchPlan
from rlbench.adapters.registry import get_adapter
from rlbench.harness import settings
from rlbench.harness.cluster.session import ClusterSession
from rlbench.harness.cluster.worker_env import cluster_env
from rlbench.harness.errors import RLBenchError
from rlbench.harness.predict.run_prediction import measured_vs_predicted, predict_run
from rlbench.harness.record.plausibility import data_errors
from rlbench.harness.record.schema import (
    PREDICTION_FILE,
    SPANS_FILE,
    STEPS_FILE,
    FrameworkIdentity,
    RunRecord,
    Status,
)
from rlbench.harness.record.store import (
    HEARTBEAT_S,
    heartbeat,
    new_run_dir,
    runner_identity,
    summarize,
    utc_now,
    write_json,
    write_run_json,
    write_run_json_in_place,
    write_spans,
    write_steps,
)
from rlbench.harness.record.time_to_target import price_target, time_to_target
from rlbench.harness.run import profiling
from rlbench.harness.run.derive import (
    canonical_work,
    derive_step_metrics,
    model_flops_utilisation,
    weight_sync_rate,
)
from rlbench.harness.run.failure_cause import LOG_FILE, classify, log_tail, oom_kill_count
from rlbench.harness.run.framework_process import Outcome, launch
from rlbench.harness.run.step_stamps import apply_stamps, note_seen
from rlbench.harness.run.stop_signals import RunStop, StopSignals, describe, stop_signals
from rlbench.harness.spec.environment import collect_environment, rlbench_identity
from rlbench.harness.spec.evaluation import evaluation_contract
from rlbench.harness.spec.inputs import prepare_inputs
from rlbench.harness.spec.parallel import knob_label
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE, write_prompts


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


class ProgressPrinter:
    """Prints `step i/N` lines as the framework's metrics file grows."""

    def __init__(self, adapter: Adapter, run_dir: Path, total_steps: int, gpu_count: int, echo: Callable[[str], None]):
        self.adapter, self.run_dir, self.total, self.gpus, self.echo = adapter, run_dir, total_steps, gpu_count, echo
        self.shown = 0
        self.size = -1
        self.steps = pd.DataFrame()  # the steps seen so far (the framework's own timer)

    def __call__(self) -> None:
        path = self.adapter.metrics_file(self.run_dir)
        size = path.stat().st_size if path.exists() else 0
        if size == self.size:
            return
        self.size = size
        steps, _ = derive_step_metrics(self.adapter.read_steps(self.run_dir), self.gpus)  # live: own timer
        self.steps = steps
        note_seen(self.run_dir, steps["step"].iloc[self.shown :].tolist() if not steps.empty else [])
        for row in steps.iloc[self.shown :].itertuples():
            self.echo(
                f"step {int(row.step)}/{self.total}  {row.step_time_s:7.2f} s  "
                f"{row.tokens_per_s:9.1f} tokens/s  reward {row.reward_mean:.3f}"
            )
        self.shown = len(steps)


def _error(outcome: Outcome, run_dir: Path, oom_kills_before: int | None) -> dict[str, Any]:
    """run.json's error entry; the framework's own failures are classified from evidence (failure_cause)."""
    if outcome.kind == "framework_error" and outcome.returncode:
        return classify(outcome.returncode, run_dir, oom_kills_before, run_dir / profiling.TELEMETRY_FILE)
    tail = log_tail(run_dir)
    if outcome.kind == "interrupted":
        signum = outcome.signum or signal.SIGINT
        return {
            "kind": "interrupted",
            "message": f"interrupted by {describe(signum)}",
            "signal": signal.Signals(signum).name,
            "log_tail": tail,
        }
    if outcome.kind == "timeout":
        return {"kind": "timeout", "message": "the framework ran past its timeout and was stopped", "log_tail": tail}
    if outcome.kind == "launch_error":
        return {
            "kind": "launch_error",
            "message": (tail or ["the framework could not be started"])[-1],
            "log_tail": tail,
        }
    # exited 0 without logging every step: not a complete benchmark
    return {
        "kind": "framework_error",
        "message": "the framework exited 0 but logged fewer steps than asked",
        "log_tail": tail,
    }


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
        plan = LaunchPlan(argv=plan.argv, env=cluster_env(plan.env, spec.ray_address), files=plan.files)
    return plan.describe()


def _quiet(echo: Callable[[str], None]) -> Callable[[str], None]:
    """Progress lines that never fail the run: after SIGHUP the terminal is gone and writes raise EIO."""

    def say(line: str) -> None:
        try:
            echo(line)
        except OSError:
            pass

    return say


def execute(spec: RunSpec, *, echo: Callable[[str], None] = print) -> Path:
    """Run `spec` for real and return its record folder; raises RunFailed / RunInterrupted after recording."""
    with stop_signals() as stops:
        return _execute(spec, _quiet(echo), stops)


def _execute(spec: RunSpec, echo: Callable[[str], None], stops: StopSignals) -> Path:
    setup_start = time.perf_counter()
    run_dir: Path | None = None
    cluster: ClusterSession | None = None
    recorded = False
    try:
        adapter = get_adapter(spec.framework)
        adapter.check(spec)
        adapter.check_machine()
        profiling.sample_hz()  # a bad RLBENCH_SAMPLE_HZ is refused before anything is recorded
        cluster = _join_cluster(spec, adapter)
        inputs = prepare_inputs(spec.workload, spec.seed)
        environment = collect_environment((adapter.distribution,))
        if not adapter.version_is_tested():
            echo(
                f"warning: {adapter.name} {adapter.version()} is not a version rlbench was tested with "
                f"({adapter.tested_versions}); check the record's metrics before trusting them"
            )
        run_dir = _new_run_dir(spec)
        plan = adapter.plan(spec, inputs, run_dir)
        plan = LaunchPlan(argv=plan.argv, env={**plan.env, **profiling.framework_env(run_dir)}, files=plan.files)
        if cluster is not None:  # the driver joins the cluster and hands the run's environment to its workers
            plan = LaunchPlan(argv=plan.argv, env=cluster_env(plan.env, cluster.address), files=plan.files)
        record = RunRecord(
            run_id=run_dir.name,
            status=Status.RUNNING,
            error=None,
            framework=FrameworkIdentity(
                name=adapter.name, version=adapter.version(), tested=adapter.version_is_tested()
            ),
            workload=dataclasses.asdict(spec.workload),
            parallel=spec.parallel.to_dict(),
            seed=spec.seed,
            timeout_s=spec.timeout_s,
            model_path=inputs.model,
            data=inputs.data,
            cpu_lane=adapter.lane(spec),
            equal_work=adapter.equal_work(spec),
            command=plan.argv,
            rlbench=rlbench_identity(),
            runner=runner_identity(),
            environment=environment,
            started_at=utc_now(),
            ended_at=None,
        )
        if cluster is not None:
            record["cluster"] = cluster.describe(adapter.cluster_placement)
        _start_record(run_dir, record, inputs, plan)
        recorded = True
        if cluster is not None:
            _stage(cluster, adapter, spec, inputs, run_dir)
            if profiling.sample_hz() > 0:  # RLBENCH_SAMPLE_HZ=0 turns every node's sampling off too
                cluster.start_sampling(run_dir, profiling.sample_hz())
        setup_s = time.perf_counter() - setup_start
        echo(
            f"run {run_dir.name}: {adapter.name} {adapter.version()} on {spec.workload.name}, "
            f"{spec.workload.steps} steps (log: {run_dir / LOG_FILE})"
        )

        parent = psutil.Process()
        cpu_before = sum(parent.cpu_times()[:2])
        printer = ProgressPrinter(adapter, run_dir, spec.workload.steps, environment["gpu_count"], echo)
        progress = _with_heartbeat(
            printer,
            run_dir,
            cluster.poll if cluster is not None else None,
        )
        sampler: list = []
        oom_kills_before = oom_kill_count()
        record["launched_unix_s"] = time.time()
        outcome = launch(
            plan,
            run_dir,
            spec.timeout_s,
            progress,
            stops,
            on_start=lambda pid: sampler.append(
                _start_sampler(run_dir, pid, echo, cluster is not None, bool(environment["gpu_count"]))
            ),
            reached=_target_watch(spec, printer, echo),
        )
    except RunStop as stop:
        if not recorded:
            if cluster is not None:
                cluster.close()
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)  # half-made folder without a run.json: no record
            raise RunInterrupted(
                f"interrupted by {describe(stop.signum)} before the framework started; nothing was recorded",
                stop.signum,
            ) from None
        outcome, sampler, oom_kills_before = Outcome(None, "interrupted", 0.0, stop.signum), [], None
        parent, cpu_before, setup_s = psutil.Process(), 0.0, time.perf_counter() - setup_start
    except BaseException:
        if cluster is not None and not recorded:
            cluster.close()  # refused before launch: leave the cluster as found
        raise
    stops.hold()  # from here every signal is only noted: the record is written whatever comes
    parent_cpu_s = sum(parent.cpu_times()[:2]) - cpu_before
    handles = [h for h in sampler if h is not None]
    if cluster is not None:
        _finish_cluster(cluster, run_dir, record, handles[0] if handles else None)
    return _finish(
        spec,
        adapter,
        inputs.model,
        _job_machine(environment, record.get("cluster"), adapter.job_gpus(spec)),
        run_dir,
        record,
        outcome,
        handles,
        oom_kills_before,
        setup_s,
        parent_cpu_s,
    )


def _job_machine(environment: dict[str, Any], cluster: dict[str, Any] | None, job_gpus: int) -> dict[str, Any]:
    """The machine the job's figures are per (GPUs, the hardware row of its prediction, its $/GPU-hour): this
    host's, or on a cluster whose nodes have GPUs the job's GPUs of the nodes' model (rlbench may run on a host
    without any). run.json's `environment` stays this host's."""
    models = [name for node in (cluster or {}).get("nodes", []) for name in (node.get("gpu_models") or {}).values()]
    if not models:
        return environment
    return {**environment, "gpus": [{"name": models[0]}] * job_gpus, "gpu_count": job_gpus}


def _join_cluster(spec: RunSpec, adapter: Adapter) -> ClusterSession | None:
    """The Ray cluster of `--ray-address`, checked against the layout before anything is recorded; a multi-node
    layout without one is refused."""
    p = spec.parallel
    if not spec.ray_address:
        if p.nodes > 1:
            raise RLBenchError(
                f"--parallel nodes={p.nodes}: a multi-node run joins a running Ray cluster; give --ray-address "
                "HOST:PORT of its head (or set RAY_ADDRESS), or use nodes=1"
            )
        return None
    if not adapter.brings_own_ray:  # it runs on this host (its nodes knob is refused): a Ray job's cell, say
        return None
    layout = knob_label(p.non_default())
    return ClusterSession.open(
        spec.ray_address, nodes=p.nodes, gpus_each=p.gpus_on_each_node(adapter.job_gpus(spec)), layout=layout
    )


def _stage(cluster: ClusterSession, adapter: Adapter, spec: RunSpec, inputs: Any, run_dir: Path) -> None:
    """The run's inputs onto every node; a file that cannot be read is named in the record, and the framework
    then fails where a node lacks it (its own error in framework.log)."""
    try:
        written = cluster.stage(run_dir, adapter.node_inputs(spec, inputs, run_dir))
    except OSError as exc:
        cluster.notes.append(f"staging the run's inputs: {exc.strerror or exc}")
        return
    cluster.staged = {label: len(paths) for label, paths in written.items()}


def _finish_cluster(cluster: ClusterSession, run_dir: Path, record: RunRecord, sampler: Any) -> None:
    """What the framework left on other nodes comes back, every node's telemetry joins telemetry.parquet, and
    the run leaves the cluster; a node that fails here is named in the record, never fatal to it."""
    try:
        brought = cluster.collect(run_dir)
        if sampler is not None:
            sampler.stop()  # the driver's own rows first: the nodes' are added to its file
        rows = cluster.finish(run_dir / profiling.TELEMETRY_FILE)
        record["cluster"].update(staged=cluster.staged, collected=brought, node_rows=rows, notes=cluster.notes)
    except (OSError, ValueError, RLBenchError) as exc:
        record["cluster"].setdefault("notes", []).append(f"finishing on the cluster: {type(exc).__name__}: {exc}")
    finally:
        cluster.close()


def _start_sampler(
    run_dir: Path, pid: int, echo: Callable[[str], None], on_cluster: bool = False, gpus: bool = True
) -> Any:
    """Telemetry is an addition to the run, not a condition for it: if the sampler cannot start (the
    framework already exited, no room for its files), the run goes on and the record says why. On a cluster
    it samples the driver's process tree (the node agents sample the nodes and their GPUs)."""
    try:
        return profiling.start(run_dir, pid, on_cluster=on_cluster, gpus=gpus)
    except (RLBenchError, ValueError, OSError) as exc:
        echo(f"warning: no telemetry for this run: {exc}")
        return None


def _new_run_dir(spec: RunSpec) -> Path:
    try:
        return new_run_dir(spec.out, spec.framework, spec.workload.name)
    except OSError as exc:
        raise RLBenchError(
            f"--out {spec.out}: cannot create a run folder there ({exc.strerror or exc}); choose a writable folder"
        ) from None


def _start_record(run_dir: Path, record: RunRecord, inputs: Any, plan: LaunchPlan) -> None:
    """run.json ("running") and the framework's input files; if the disk refuses them, no record at all."""
    try:
        write_run_json(run_dir, record)
        write_prompts(inputs.prompts, run_dir / "prompts.jsonl")
        if inputs.eval_prompts:  # an eval_accuracy target's held-out problems
            write_prompts(inputs.eval_prompts, run_dir / EVAL_PROMPTS_FILE)
        for name, content in plan.files.items():
            (run_dir / name).write_text(content)
    except OSError as exc:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise RLBenchError(
            f"cannot write the run record in {run_dir.parent} ({exc.strerror or exc}); "
            "free some space or choose another --out"
        ) from None


def _target_watch(spec: RunSpec, printer: ProgressPrinter, echo: Callable[[str], None]) -> Callable[[], bool]:
    """Whether the workload's quality target, where it ends the run, holds on the steps seen so far."""
    target = spec.workload.target
    if target is None or not target.stop:
        return lambda: False
    seen = [(-1, -1)]

    def reached() -> bool:
        steps = printer.steps
        # a framework may log an evaluation after its step's row: a new value of the metric counts as news
        logged = (len(steps), int(steps[target.metric].notna().sum()) if target.metric in steps else 0)
        if steps.empty or logged == seen[0]:
            return False
        seen[0] = logged
        found = time_to_target(steps, dataclasses.asdict(target), None, 0)
        if found["reached"]:
            over = "evaluations" if target.evaluates else "steps"
            echo(
                f"target reached at step {found['step']} ({target.metric} over {target.window} {over} >= "
                f"{target.value:g}): stopping the run"
            )
        return bool(found["reached"])

    return reached


def _with_heartbeat(
    progress: Callable[[], None], run_dir: Path, also: Callable[[], None] | None = None
) -> Callable[[], None]:
    last = [time.monotonic()]

    def poll() -> None:
        if time.monotonic() - last[0] >= HEARTBEAT_S:
            heartbeat(run_dir)
            last[0] = time.monotonic()
        progress()
        if also is not None:
            also()

    return poll


def _finish(
    spec: RunSpec,
    adapter: Adapter,
    model: str,
    environment: dict[str, Any],
    run_dir: Path,
    record: RunRecord,
    outcome: Outcome,
    sampler: list,
    oom_kills_before: int | None,
    setup_s: float,
    parent_cpu_s: float,
) -> Path:
    """Read what the framework logged, write the record's files, end run.json in a terminal status."""
    record_start = time.perf_counter()
    notes: list[str] = []
    try:
        steps = adapter.read_steps(run_dir)
    except (OSError, ValueError, KeyError) as exc:  # a damaged metrics file must not cost the record
        steps, notes = pd.DataFrame(), [f"could not read the framework's metrics: {type(exc).__name__}: {exc}"]
    steps, stand_in = apply_stamps(steps, run_dir)  # one step-time definition; verl's missing boundaries
    if stand_in:
        notes.append(stand_in)
    steps, own_timer = derive_step_metrics(steps, environment["gpu_count"])
    if own_timer:
        notes.append(own_timer)
    try:
        steps, record["telemetry"] = profiling.add_telemetry(run_dir, sampler[0] if sampler else None, steps)
    except (OSError, ValueError) as exc:
        record["telemetry"] = {"error": f"{type(exc).__name__}: {exc}"}
    write_errors: list[str] = []
    try:
        record["comm"] = profiling.add_comm(run_dir, steps)
    except (OSError, ValueError) as exc:
        record["comm"], _ = None, write_errors.append(f"comm.parquet: {exc}")
    record["equal_work"] = adapter.equal_work(spec, run_dir)  # now with what the framework itself resolved
    if outcome.kind is None and len(steps) < spec.workload.steps and not outcome.at_target:
        outcome.kind = "framework_error"
    if spec.workload.target is not None:
        gpus = spec.parallel.world_size if environment["gpus"] else 0
        record["target"] = time_to_target(
            steps, dataclasses.asdict(spec.workload.target), record.get("launched_unix_s"), gpus
        )
        record["target"]["stopped_at_target"] = outcome.at_target
        price = settings.gpu_hour_usd(_gpu_price(environment))  # the price record["costs"] uses
        record["target"].update(price_target(record["target"], price, settings.kwh_usd()))
        held_out = evaluation_contract(spec.workload)
        if held_out is not None:  # how the held-out evaluation ran: the shared contract and this framework's hook
            record["target"]["evaluation"] = {**held_out, **(adapter.evaluation(spec) or {})}
    if not steps.empty:
        prediction = _prediction(spec, adapter, model, environment, steps)
        steps["mfu"] = model_flops_utilisation(steps, prediction)  # rlbench's, the same for every framework
        steps["weight_sync_gb_per_s"] = weight_sync_rate(steps, prediction)
    record.update(
        time_to_first_step_s=_time_to_first_step(record, steps),
        returncode=outcome.returncode,
        ended_at=utc_now(),
        duration_s=outcome.wall_s,
        steps_recorded=len(steps),
        summary=summarize(steps, spec.workload.warmup_steps) if not steps.empty else {},
    )
    if spec.profile is not None:
        record["profile"] = profiling.profile_record(run_dir, spec.profile, steps, spec.workload.warmup_steps)
    if notes:
        record["notes"] = notes
    if not steps.empty:
        _write_or_note(write_errors, STEPS_FILE, lambda: write_steps(run_dir, steps))
        try:
            spans = adapter.read_spans(run_dir)
        except (OSError, ValueError, KeyError) as exc:  # a damaged log must not cost the record
            spans = None  # the stages are then placed end to end, as for a framework that logs durations only
            record.setdefault("notes", []).append(f"could not read the framework's stage spans: {exc}")
        if spans is not None and not spans.empty:
            _write_or_note(write_errors, SPANS_FILE, lambda: write_spans(run_dir, spans))
        _write_or_note(write_errors, PREDICTION_FILE, lambda: write_json(run_dir / PREDICTION_FILE, prediction))
        record["vs_model"] = measured_vs_predicted(record["summary"], prediction)
        if impossible := data_errors(record, steps):  # a figure no machine could produce: named, never compared
            record["data_errors"] = impossible
        gpus = spec.parallel.world_size if environment["gpus"] else 0
        record["costs"] = profiling.costs(record["summary"], steps, gpus, _gpu_price(environment))
    error = None if outcome.kind is None else _error(outcome, run_dir, oom_kills_before)
    if write_errors:
        record["record_errors"] = write_errors
        if error is None:
            error = {"kind": "record_error", "message": f"could not write {'; '.join(write_errors)}", "log_tail": []}
    status = (
        Status.SUCCEEDED if error is None else (Status.INTERRUPTED if outcome.kind == "interrupted" else Status.FAILED)
    )
    record.update(status=status, error=error, files=_files(run_dir))
    record["overhead"] = _overhead(
        setup_s,
        parent_cpu_s,
        steps,
        outcome,
        time.perf_counter() - record_start,
        record.get("telemetry"),
        environment.get("cpu_count"),
    )
    _end_record(run_dir, record)
    kept = f"{len(steps)} step(s) recorded in {run_dir}"
    if outcome.kind == "interrupted":
        raise RunInterrupted(
            f"interrupted by {describe(outcome.signum or signal.SIGINT)}; the framework was "
            f"stopped and the partial record is kept: {kept}",
            outcome.signum or signal.SIGINT,
        )
    if write_errors:
        raise RLBenchError(
            f"the run ended but its record is incomplete: could not write {write_errors[0]}; "
            f"run.json says {status} ({error['kind']}); free some space and run again"
        )
    if error is not None:
        raise RunFailed(
            f"run failed ({error['kind']}): {error['message'][:300]}; record: {run_dir}, "
            f"full log: {run_dir / LOG_FILE}",
            run_dir,
        )
    return run_dir


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


_LARGE_FIELDS = ("summary", "vs_model", "costs", "overhead", "telemetry", "comm", "environment")


def _end_record(run_dir: Path, record: RunRecord) -> None:
    """The terminal run.json; when even that cannot be written, say so (readers then show the record,
    still "running" on disk, as abandoned once this process has exited)."""
    try:
        write_run_json(run_dir, record)
        return
    except OSError as exc:
        first = exc
    slim = {k: v for k, v in record.items() if k not in _LARGE_FIELDS}
    slim.update(
        status=Status.FAILED if record["status"] == Status.SUCCEEDED else record["status"],
        error=record["error"]
        or {
            "kind": "record_error",
            "log_tail": [],
            "message": f"run.json: {first.strerror or first}; summary left out",
        },
    )
    try:
        write_run_json_in_place(run_dir, slim)
    except OSError:
        raise RLBenchError(
            f"the run ended ({record['status']}) but its record could not be written in {run_dir} "
            f"({first.strerror or first}); run.json still says running"
        ) from None


def _gpu_price(environment: dict[str, Any]) -> float | None:
    """The cited default $/GPU-hour of the run's GPU, if the hardware table has one."""
    from rlbench.harness.perfmodel import find_hardware

    row = find_hardware(environment["gpus"][0]["name"]) if environment["gpus"] else None
    return row.usd_per_gpu_hour if row is not None else None


def _prediction(
    spec: RunSpec, adapter: Adapter, model: str, environment: dict[str, Any], steps: pd.DataFrame
) -> dict[str, Any]:
    """The model's prediction for this run's exact work: its measured mean prompt length (and the
    padded widths where the framework pads), and the old-log-prob pass only where the framework
    ran one (TRL skips it when updates align with generation)."""
    prompt_len = float((steps["prompt_tokens"] / steps["num_responses"]).median())
    padded = (
        (steps["padded_prompt_tokens"] / steps["num_responses"]).median() if "padded_prompt_tokens" in steps else None
    )
    width = steps["trainer_padded_width"].median() if "trainer_padded_width" in steps else None
    recompute = bool(steps["time_old_log_prob_s"].notna().any()) if "time_old_log_prob_s" in steps else True
    try:
        prediction = predict_run(
            spec.workload,
            spec.parallel,
            model,
            environment,
            prompt_len=prompt_len,
            recompute_old_logprob=recompute,
            shape_fields=adapter.launch_shape(spec, lane=adapter.lane(spec) is not None),
            framework=spec.framework,
            padded_prompt_len=None if padded is None else float(padded),
            trainer_padded_width=None if width is None else float(width),
        )
        if prediction.get("available"):
            prediction["canonical"] = canonical_work(spec.workload, spec.parallel, model, environment, prompt_len)
        return prediction
    except (RLBenchError, ValueError) as exc:  # the benchmark record matters more than its prediction
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _time_to_first_step(record: RunRecord, steps: pd.DataFrame) -> float | None:
    """Launch to the end of the first step (its writer's stamp, else rlbench's arrival stamp); None without one."""
    launched = record.get("launched_unix_s")
    if launched is None or steps.empty:
        return None
    first = steps.sort_values("step").iloc[0]
    for column in ("step_end_unix_s", "step_seen_unix_s"):
        end = first.get(column)
        if end is not None and math.isfinite(end) and end >= launched:
            return float(end - launched)
    return None


def _overhead(
    setup_s: float,
    parent_cpu_s: float,
    steps: pd.DataFrame,
    outcome: Outcome,
    record_s: float,
    telemetry: dict[str, Any] | None = None,
    cores: int | None = None,
) -> dict[str, float | None]:
    """rlbench's own cost around the framework, per step where it recurs, and while the framework ran: the
    sampler's and the runner's CPU as a share of all the CPU the run used and of the machine's cores. What
    that costs the framework's step time is measured by benchmarks/rlbench_overhead.py (with and without)."""
    n = max(len(steps), 1)
    in_steps = float(steps["step_time_s"].sum()) if not steps.empty else 0.0
    telemetry = telemetry or {}
    sampler = telemetry.get("loop_cpu_s", telemetry.get("sampler_cpu_s"))
    framework = telemetry.get("framework_cpu_s")
    ours = parent_cpu_s + (sampler or 0.0)
    return {
        "setup_s": setup_s,  # data, tokenizer, tiny model (cached after the first run), record start
        "record_s": record_s,  # reading metrics, writing steps.parquet and run.json
        "parent_cpu_s_per_step": parent_cpu_s / n,  # progress polling while the framework runs
        # Framework process start-up (imports, model load) plus teardown: outside any step.
        "framework_outside_steps_s": outcome.wall_s - in_steps if not steps.empty else None,
        "parent_cpu_s": parent_cpu_s,
        "sampler_cpu_s": sampler,  # its sampling loop (start-up and the final write excluded)
        "framework_cpu_s": framework,
        # rlbench's CPU over all the CPU the run used (fraction, lower is better)
        "cpu_share_of_run": ours / (ours + framework) if framework else None,
        # rlbench's CPU over the machine's capacity while the framework ran (fraction of cores x wall)
        "share_of_machine": ours / (outcome.wall_s * cores) if cores and outcome.wall_s > 0 else None,
    }
