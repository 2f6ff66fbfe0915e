"""The ray executor: each run of a sweep as a job on an existing Ray cluster, through Ray's job API.

    ray start --head --dashboard-host 127.0.0.1          # needs ray[default]: the job API lives in the dashboard
    rlbench sweep --framework trl --workload gsm8k-grpo-tiny --executor ray --ray-address http://127.0.0.1:8265

Each run is submitted with `JobSubmissionClient.submit_job` as
`python -m rlbench.harness.sweep.executors.ray_job <rlbench run arguments>`, one at a time (runs
sharing a cluster would disturb each other's measurements). The job's record comes
back through its log (`rlbench.harness.sweep.executors.record_transfer`) into the sweep folder.

GPUs: the entrypoint asks for `world_size` GPUs (`entrypoint_num_gpus`) when its
framework trains in the entrypoint's own processes (TRL under accelerate), and for
none when the framework is Ray-based (verl, OpenRLHF): those join the job's cluster
and reserve their GPUs with their own placement groups, so reserving them for the
entrypoint as well would leave their workers waiting for GPUs that never free up.
Tiny workloads of CPU-capable frameworks ask for no GPU.

Limits: the cluster's nodes need `python` on PATH with the same rlbench and
frameworks installed (nothing is uploaded), the workload must be a catalog name or a
path that exists on the node, and the data and model caches are the node's. The
refusal check runs here, with this machine's view of GPUs for machine-dependent
checks; a run the node itself refuses comes back as a launch error.
"""

from __future__ import annotations

import os
import secrets
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.status import RunStatus
from rlbench.harness.run.failure_cause import OOM_TEXT, TAIL_LINES
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.sweep.executors.executor import RunResult, failure, result_from_record
from rlbench.harness.sweep.executors.record_transfer import strip_blocks, unpack

START_SLACK_S = 900.0  # queueing for GPUs, runtime-env setup, data and model preparation
STOP_WAIT_S = 60  # RAY_JOB_STOP_WAIT_TIME_S for our jobs: time to stop the framework and send the record
POLL_S = 2.0
# The runner's evidence of OOM, plus Ray's own memory monitor's words for a job it killed.
_OOM_MARKERS = (*(text.lower() for text in OOM_TEXT), "running low on memory")


def entrypoint_gpus(spec: RunSpec) -> int:
    adapter = get_adapter(spec.framework)
    if adapter.brings_own_ray:
        return 0
    if adapter.runs_on_cpu and spec.workload.model.tiny is not None:
        return 0
    return spec.parallel.world_size


class RayExecutor:
    kind = "ray"

    def __init__(self, address: str | None) -> None:
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError:
            raise RLBenchError("the ray executor needs Ray's job API: pip install 'rlbench[ray]'") from None
        try:
            self.client = JobSubmissionClient(address)
        except Exception as exc:  # ray raises ConnectionError, ValueError or RuntimeError here
            raise RLBenchError(
                f"cannot reach the Ray job API at {address or '$RAY_ADDRESS'}: {exc}; pass the "
                "dashboard address of a running cluster, e.g. --ray-address http://127.0.0.1:8265"
            ) from None
        self.address = address or self.client.get_address()

    def check(self, spec: RunSpec, run_args: list[str] | None = None) -> None:
        get_adapter(spec.framework).check(spec)  # the node decides whether its machine can run it

    def run(self, spec: RunSpec, run_args: list[str], echo: Callable[[str], None]) -> RunResult:
        job_id = f"rlbench-{spec.out.name}-{secrets.token_hex(3)}"
        executor = {"kind": self.kind, "address": self.address, "job_id": job_id}
        try:
            self._submit(spec, run_args, job_id)
            echo(f"submitted Ray job {job_id} ({entrypoint_gpus(spec)} GPUs)")
            try:
                stopped_by = self._follow(job_id, time.monotonic() + spec.timeout_s + START_SLACK_S, echo)
            except KeyboardInterrupt:
                stopped_by = "interrupted"
                self._stop(job_id)
            return self._collect(spec, job_id, stopped_by, executor)
        except Exception as exc:  # the job API failed: record it, the sweep goes on
            return RunResult(
                RunStatus.FAILED, None, failure("launch_error", f"Ray job API: {type(exc).__name__}: {exc}"), executor
            )

    def _submit(self, spec: RunSpec, run_args: list[str], job_id: str) -> None:
        self.client.submit_job(
            entrypoint=shlex.join(["python", "-m", "rlbench.harness.sweep.executors.ray_job", *run_args]),
            submission_id=job_id,
            entrypoint_num_gpus=entrypoint_gpus(spec) or None,
            runtime_env={
                "env_vars": {
                    "RLBENCH_RUN_TIMEOUT_S": str(spec.timeout_s),
                    "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S),
                    # Ray forces OMP_NUM_THREADS=1 on a job left without it, which would
                    # make torch run single-threaded; "" is undone by ray_job, so the run
                    # threads as `rlbench run` would unless the user set a value here.
                    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", ""),
                }
            },
            metadata={"rlbench_sweep": spec.out.name},
        )

    def _follow(self, job_id: str, deadline: float, echo: Callable[[str], None]) -> str | None:
        """Echo the job's log until it ends; stop it past the deadline ("timeout")."""
        shown = 0
        while True:
            status = self.client.get_job_status(job_id)
            lines = strip_blocks(self.client.get_job_logs(job_id))
            for line in lines[shown:]:
                echo(line)
            shown = len(lines)
            if status.is_terminal():
                return None
            if time.monotonic() > deadline:
                self._stop(job_id)
                return "timeout"
            time.sleep(POLL_S)

    def _stop(self, job_id: str) -> None:
        try:
            self.client.stop_job(job_id)
            end = time.monotonic() + STOP_WAIT_S + 30
            while not self.client.get_job_status(job_id).is_terminal() and time.monotonic() < end:
                time.sleep(0.5)
        except Exception:  # never submitted, or the API is gone: nothing more to stop from here
            pass

    def _collect(self, spec: RunSpec, job_id: str, stopped_by: str | None, executor: dict[str, Any]) -> RunResult:
        from ray.job_submission import JobStatus

        info = self.client.get_job_info(job_id)
        log = self.client.get_job_logs(job_id)
        run_dir = unpack(log, spec.out)
        tail = strip_blocks(log)[-TAIL_LINES:]
        if stopped_by == "interrupted":
            return (
                result_from_record(run_dir, RunStatus.INTERRUPTED, executor)
                if run_dir
                else RunResult(
                    "interrupted", None, failure("interrupted", "interrupted by the user (Ctrl-C)", tail), executor
                )
            )
        if stopped_by == "timeout":
            message = (
                f"the Ray job ran past the run timeout ({spec.timeout_s:.0f} s) plus {START_SLACK_S:.0f} s "
                "for queueing and setup, and was stopped"
            )
            return RunResult(RunStatus.FAILED, run_dir, failure("timeout", message, tail), executor)
        if info.status == JobStatus.STOPPED:
            message = "the Ray job was stopped outside this sweep (ray job stop, the dashboard or the cluster)"
            return RunResult(
                RunStatus.FAILED, run_dir, failure("stopped", message, _record_tail(run_dir) or tail), executor
            )
        if run_dir is not None:
            result = result_from_record(run_dir, RunStatus.FAILED, executor)
            if info.status == JobStatus.SUCCEEDED and result.error is None:
                result.status = RunStatus.SUCCEEDED
            elif result.error is None:
                result.error = failure("launch_error", info.message or "the job failed after its run", tail)
            return result
        return RunResult(RunStatus.FAILED, None, _no_record_error(info.message or "", tail), executor)


def _record_tail(run_dir: Path | None) -> list[str]:
    from rlbench.harness.run.failure_cause import log_tail

    return log_tail(run_dir) if run_dir is not None else []


def _no_record_error(job_message: str, tail: list[str]) -> dict[str, Any]:
    """A job that ended without sending a record: it failed before (or while) starting the run."""
    text = " ".join([job_message, *tail]).lower()
    errors = [line for line in tail if line.startswith("error:")]
    message = (
        errors[-1][len("error:") :].strip() if errors else (job_message.strip().splitlines() or ["job failed"])[-1]
    )
    return failure("oom" if any(m in text for m in _OOM_MARKERS) else "launch_error", message, tail)
