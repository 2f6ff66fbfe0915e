"""Framework environments: each run of a sweep in the virtualenv of its own framework.

verl and OpenRLHF pin conflicting releases (transformers, vLLM, Ray), so one Python
cannot hold both; each has an environment of its own (`nox -s verl_cpu` and
`nox -s openrlhf_cpu` build them on CPU). With `--env verl=.nox/verl_cpu`, a cell of
that framework runs as `<env>/bin/python -m rlbench.harness run ...` into the sweep folder,
and is refused or accepted by that environment's own adapter (`rlbench run --dry-run`
there), so a sweep over trl,verl,openrlhf writes one folder that one report compares.
Frameworks without an `--env` run here, through the local executor.

    rlbench sweep --framework trl,verl,openrlhf --workload gsm8k-grpo-tiny --steps 2 \\
        --env verl=.nox/verl_cpu --env openrlhf=.nox/openrlhf_cpu
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.status import RunStatus
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.sweep.executors.executor import RunResult, failure, result_from_record
from rlbench.harness.sweep.executors.local import LocalExecutor, _run_dirs

CHECK_TIMEOUT_S = 600  # a dry run there imports the framework and may build the tiny model


def parse_envs(pairs: tuple[str, ...] | list[str]) -> dict[str, Path]:
    """`--env verl=PATH` (repeatable) -> {"verl": PATH/bin/python}, each checked to exist."""
    from rlbench.adapters.registry import get_adapter

    envs: dict[str, Path] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip() or not raw.strip():
            raise RLBenchError(f"--env {pair!r}: expected FRAMEWORK=VIRTUALENV, e.g. --env verl=.nox/verl_cpu")
        get_adapter(name.strip())  # an unknown framework name is refused with the nearest one
        python = Path(raw.strip()).expanduser() / "bin" / "python"
        if not python.exists():
            raise RLBenchError(
                f"--env {pair}: no Python at {python}; build the environment first "
                f"(e.g. nox -s {name.strip()}_cpu) or give its virtualenv folder"
            )
        envs[name.strip()] = python
    return envs


class EnvironmentExecutor:
    kind = "local"

    def __init__(self, envs: dict[str, Path]) -> None:
        self.envs, self.here = envs, LocalExecutor()

    def check(self, spec: RunSpec, run_args: list[str] | None = None) -> None:
        python = self.envs.get(spec.framework)
        if python is None or run_args is None:
            return self.here.check(spec, run_args)
        done = subprocess.run(
            [str(python), "-m", "rlbench.harness", "run", *run_args, "--out", str(spec.out), "--dry-run"],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
        )
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"]
            raise RLBenchError(f"{lines[-1].removeprefix('error: ')} (in {python.parent.parent})")
        return None

    def run(self, spec: RunSpec, run_args: list[str], echo: Callable[[str], None]) -> RunResult:
        python = self.envs.get(spec.framework)
        if python is None:
            return self.here.run(spec, run_args, echo)
        executor = {"kind": "environment", "python": str(python)}
        before = _run_dirs(spec.out)
        env = {**os.environ, "RLBENCH_RUN_TIMEOUT_S": str(spec.timeout_s)}
        # Same process group: a Ctrl-C reaches the child's runner, which stops its framework and records it.
        process = subprocess.Popen(
            [str(python), "-m", "rlbench.harness", "run", *run_args, "--out", str(spec.out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        try:
            for line in process.stdout:  # type: ignore[union-attr]
                echo(line.rstrip())
            process.wait()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)
            process.wait()
            status = RunStatus.INTERRUPTED
        else:
            status = (
                RunStatus.SUCCEEDED
                if process.returncode == 0
                else (RunStatus.INTERRUPTED if process.returncode == 130 else RunStatus.FAILED)
            )
        created = sorted(_run_dirs(spec.out) - before)
        if not created:
            return RunResult(
                RunStatus.INTERRUPTED if status == RunStatus.INTERRUPTED else RunStatus.FAILED,
                None,
                failure(
                    "launch_error", f"{python} -m rlbench.harness run exited {process.returncode} before recording"
                ),
                executor,
            )
        return result_from_record(created[-1], status, executor)
