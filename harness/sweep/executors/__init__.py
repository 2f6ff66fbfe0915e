"""Executors: where the runs of a sweep happen, one run at a time.

`local` runs each run on this machine through the runner; `ray` submits each as a
job to an existing Ray cluster (`--ray-address`) and copies its record back. Both
return a `RunResult` and never raise for a run that failed: the sweep goes on.
Ray is imported only when the ray executor is chosen.

    rlbench sweep --framework trl --workload gsm8k-grpo-tiny --grid placement=colocated,disaggregated
    rlbench sweep ... --executor ray --ray-address http://127.0.0.1:8265
"""

from __future__ import annotations

from rlbench.harness.errors import RLBenchError
from rlbench.harness.sweep.executors.executor import Executor

EXECUTORS = ("local", "ray")


def make_executor(kind: str, ray_address: str | None = None, envs: tuple[str, ...] = ()) -> Executor:
    if kind == "local":
        if ray_address:
            raise RLBenchError("--ray-address is for --executor ray; drop it or add --executor ray")
        if envs:
            from rlbench.harness.sweep.executors.environments import EnvironmentExecutor, parse_envs

            return EnvironmentExecutor(parse_envs(envs))
        from rlbench.harness.sweep.executors.local import LocalExecutor

        return LocalExecutor()
    if envs:
        raise RLBenchError("--env is for --executor local (each framework in its own virtualenv here); drop it")
    if kind == "ray":
        from rlbench.harness.sweep.executors.ray_executor import RayExecutor

        return RayExecutor(ray_address)
    raise RLBenchError(f"unknown executor {kind!r}; available: {', '.join(EXECUTORS)}")
