"""Run one benchmark: check, prepare inputs, launch the framework, write the record.

The framework runs as its own process group with a timeout; its output goes to
`framework.log` in the run folder, and its metrics file is watched for progress.
`run.json` is written (atomically) when the run starts and again when it ends, so
a crash, a timeout or Ctrl-C still leaves a record that says what happened.

    rlbench run --framework trl --workload gsm8k-grpo-tiny --steps 3
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import psutil

from rlbench import profiling
from rlbench.adapters.base import Adapter, LaunchPlan
from rlbench.adapters.registry import get_adapter
from rlbench.derive import derive_step_metrics
from rlbench.environment import collect_environment, rlbench_identity
from rlbench.errors import RLBenchError
from rlbench.inputs import prepare_inputs
from rlbench.prediction import measured_vs_predicted, predict_run
from rlbench.record import PREDICTION_FILE, new_run_dir, summarize, utc_now, write_json, write_run_json, write_steps
from rlbench.runspec import RunSpec
from rlbench.workloads.prompts import write_prompts

LOG_FILE = "framework.log"
POLL_S = 0.5
LOG_TAIL_LINES = 30
_OOM_MARKERS = ("CUDA out of memory", "OutOfMemoryError", "Cannot allocate memory", "std::bad_alloc")


@dataclass(slots=True)
class Outcome:
    returncode: int | None
    kind: str | None  # None on success, else timeout | oom | framework_error | launch_error | interrupted
    wall_s: float


class RunFailed(RLBenchError):
    """The framework ran and failed; the record folder says how."""


class RunInterrupted(RLBenchError):
    """Ctrl-C during the run; the record folder is kept with status 'interrupted'."""


def log_tail(run_dir: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    path = run_dir / LOG_FILE
    if not path.exists():
        return []
    return path.read_text(errors="replace").splitlines()[-lines:]


def _classify(returncode: int, tail: list[str]) -> str:
    if returncode == -signal.SIGKILL or any(m in line for line in tail for m in _OOM_MARKERS):
        return "oom"
    return "framework_error"


def _stop(process: subprocess.Popen) -> None:
    """Terminate the framework's whole process group (Ray/accelerate spawn children)."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def launch(plan: LaunchPlan, run_dir: Path, timeout_s: float, on_poll: Callable[[], None],
           on_start: Callable[[int], None] = lambda pid: None) -> Outcome:
    env = {**os.environ, **plan.env}
    start = time.perf_counter()
    with (run_dir / LOG_FILE).open("wb") as log:
        try:
            process = subprocess.Popen(plan.argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=run_dir,
                                       start_new_session=True, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log.write(f"launch failed: {exc}\n".encode())
            return Outcome(None, "launch_error", 0.0)
        try:
            on_start(process.pid)  # inside the try: a Ctrl-C while the sampler starts still stops the framework
            while process.poll() is None:
                if time.perf_counter() - start > timeout_s:
                    _stop(process)
                    return Outcome(process.returncode, "timeout", time.perf_counter() - start)
                on_poll()
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            _stop(process)
            return Outcome(process.returncode, "interrupted", time.perf_counter() - start)
    wall = time.perf_counter() - start
    on_poll()
    if process.returncode == 0:
        return Outcome(0, None, wall)
    return Outcome(process.returncode, _classify(process.returncode, log_tail(run_dir)), wall)


class ProgressPrinter:
    """Prints `step i/N` lines as the framework's metrics file grows."""

    def __init__(self, adapter: Adapter, run_dir: Path, total_steps: int, gpu_count: int, echo: Callable[[str], None]):
        self.adapter, self.run_dir, self.total, self.gpus, self.echo = adapter, run_dir, total_steps, gpu_count, echo
        self.shown = 0
        self.size = -1

    def __call__(self) -> None:
        path = self.adapter.metrics_file(self.run_dir)
        size = path.stat().st_size if path.exists() else 0
        if size == self.size:
            return
        self.size = size
        steps = derive_step_metrics(self.adapter.read_steps(self.run_dir), self.gpus)
        for row in steps.iloc[self.shown:].itertuples():
            self.echo(f"step {int(row.step)}/{self.total}  {row.step_time_s:7.2f} s  "
                      f"{row.tokens_per_s:9.1f} tokens/s  reward {row.reward_mean:.3f}")
        self.shown = len(steps)


def _error(kind: str, run_dir: Path) -> dict[str, Any]:
    tail = log_tail(run_dir)
    meaningful = [line for line in tail if line.strip()]
    message = {"timeout": "the framework ran past its timeout and was stopped",
               "interrupted": "interrupted by the user (Ctrl-C)"}.get(kind, meaningful[-1] if meaningful else kind)
    return {"kind": kind, "message": message, "log_tail": tail}


def dry_run(spec: RunSpec) -> str:
    """The exact launch that `execute` would make, as text; nothing is run or recorded."""
    adapter = get_adapter(spec.framework)
    adapter.check(spec)
    inputs = prepare_inputs(spec.workload, spec.seed)
    return adapter.plan(spec, inputs, spec.out / "<run_id>").describe()


def execute(spec: RunSpec, *, echo: Callable[[str], None] = print) -> Path:
    """Run `spec` for real and return its record folder; raises RunFailed after recording a failure."""
    setup_start = time.perf_counter()
    adapter = get_adapter(spec.framework)
    adapter.check(spec)
    adapter.check_machine()
    inputs = prepare_inputs(spec.workload, spec.seed)
    environment = collect_environment((adapter.distribution,))
    if not adapter.version_is_tested():
        echo(f"warning: {adapter.name} {adapter.version()} is not a version rlbench was tested with "
             f"({adapter.tested_versions}); check the record's metrics before trusting them")
    run_dir = new_run_dir(spec.out, spec.framework, spec.workload.name)
    plan = adapter.plan(spec, inputs, run_dir)
    plan = LaunchPlan(argv=plan.argv, env={**plan.env, **profiling.framework_env(run_dir)}, files=plan.files)
    record: dict[str, Any] = {
        "run_id": run_dir.name, "status": "running", "error": None,
        "framework": {"name": adapter.name, "version": adapter.version(), "tested": adapter.version_is_tested()},
        **{k: v for k, v in spec.to_dict().items() if k != "framework"},
        "model_path": inputs.model, "cpu_lane": adapter.lane(spec), "command": plan.argv, "rlbench": rlbench_identity(),
        "environment": environment, "started_at": utc_now(), "ended_at": None,
    }
    write_run_json(run_dir, record)
    write_prompts(inputs.prompts, run_dir / "prompts.jsonl")
    for name, content in plan.files.items():
        (run_dir / name).write_text(content)
    setup_s = time.perf_counter() - setup_start
    echo(f"run {run_dir.name}: {adapter.name} {adapter.version()} on {spec.workload.name}, "
         f"{spec.workload.steps} steps (log: {run_dir / LOG_FILE})")

    parent = psutil.Process()
    cpu_before = sum(parent.cpu_times()[:2])
    progress = ProgressPrinter(adapter, run_dir, spec.workload.steps, environment["gpu_count"], echo)
    sampler: list = []
    outcome = launch(plan, run_dir, spec.timeout_s, progress,
                     on_start=lambda pid: sampler.append(profiling.start(run_dir, pid)))
    sampler = [handle for handle in sampler if handle is not None]
    parent_cpu_s = sum(parent.cpu_times()[:2]) - cpu_before

    record_start = time.perf_counter()
    steps = derive_step_metrics(adapter.read_steps(run_dir), environment["gpu_count"])
    steps, record["telemetry"] = profiling.add_telemetry(run_dir, sampler[0] if sampler else None, steps)
    record["comm"] = profiling.add_comm(run_dir, steps)
    if not steps.empty:
        write_steps(run_dir, steps)
    if outcome.kind is None and len(steps) < spec.workload.steps:
        outcome.kind = "framework_error"  # exited 0 without logging every step: not a complete benchmark
    record.update(
        status="succeeded" if outcome.kind is None else ("interrupted" if outcome.kind == "interrupted" else "failed"),
        error=None if outcome.kind is None else _error(outcome.kind, run_dir),
        returncode=outcome.returncode, ended_at=utc_now(), duration_s=outcome.wall_s,
        steps_recorded=len(steps), summary=summarize(steps, spec.workload.warmup_steps) if not steps.empty else {},
        files=sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")),
    )
    if not steps.empty:
        prediction = _prediction(spec, adapter, inputs.model, environment, steps)
        write_json(run_dir / PREDICTION_FILE, prediction)
        record["files"] = sorted(set(record["files"]) | {PREDICTION_FILE})
        record["vs_model"] = measured_vs_predicted(record["summary"], prediction)
        gpus = spec.parallel.world_size if environment["gpus"] else 0
        record["costs"] = profiling.costs(record["summary"], steps, gpus, _gpu_price(environment))
    record["overhead"] = _overhead(setup_s, parent_cpu_s, steps, outcome, time.perf_counter() - record_start)
    write_run_json(run_dir, record)
    if outcome.kind == "interrupted":
        raise RunInterrupted(f"interrupted; the partial record is kept at {run_dir}")
    if outcome.kind is not None:
        raise RunFailed(f"run failed ({outcome.kind}): {record['error']['message'][:300]}; "
                        f"record: {run_dir}, full log: {run_dir / LOG_FILE}")
    return run_dir


def _gpu_price(environment: dict[str, Any]) -> float | None:
    """The cited default $/GPU-hour of the run's GPU, if the hardware table has one."""
    from rlbench.perfmodel import find_hardware

    row = find_hardware(environment["gpus"][0]["name"]) if environment["gpus"] else None
    return row.usd_per_gpu_hour if row is not None else None


def _prediction(spec: RunSpec, adapter: Adapter, model: str, environment: dict[str, Any],
                steps: pd.DataFrame) -> dict[str, Any]:
    """The model's prediction for this run's exact work: its measured mean prompt length (and the
    padded width where the framework pads), and the old-log-prob pass only where the framework
    ran one (TRL skips it when updates align with generation)."""
    prompt_len = float((steps["prompt_tokens"] / steps["num_responses"]).median())
    padded = (steps["padded_prompt_tokens"] / steps["num_responses"]).median() if "padded_prompt_tokens" in steps \
        else None
    recompute = bool(steps["time_old_log_prob_s"].notna().any()) if "time_old_log_prob_s" in steps else True
    try:
        return predict_run(spec.workload, spec.parallel, model, environment, prompt_len=prompt_len,
                           recompute_old_logprob=recompute, shape_fields=adapter.model_shape(spec),
                           framework=spec.framework, padded_prompt_len=None if padded is None else float(padded))
    except (RLBenchError, ValueError) as exc:  # the benchmark record matters more than its prediction
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _overhead(setup_s: float, parent_cpu_s: float, steps: pd.DataFrame, outcome: Outcome,
              record_s: float) -> dict[str, float | None]:
    """rlbench's own cost around the framework, per step where it recurs."""
    n = max(len(steps), 1)
    in_steps = float(steps["step_time_s"].sum()) if not steps.empty else 0.0
    return {
        "setup_s": setup_s,  # data, tokenizer, tiny model (cached after the first run), record start
        "record_s": record_s,  # reading metrics, writing steps.parquet and run.json
        "parent_cpu_s_per_step": parent_cpu_s / n,  # progress polling while the framework runs
        # Framework process start-up (imports, model load) plus teardown: outside any step.
        "framework_outside_steps_s": outcome.wall_s - in_steps if not steps.empty else None,
    }
