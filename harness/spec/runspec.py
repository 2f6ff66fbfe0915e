"""RunSpec: everything that defines one benchmark run, resolved before launch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlbench.harness.settings import check_environment, run_timeout_s
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    framework: str
    workload: Workload
    parallel: Parallelism
    seed: int = 0
    out: Path = Path("results")
    timeout_s: float = 7200.0


def build_run_spec(
    framework: str, workload: str, parallel: tuple[str, ...] | list[str], *, steps: int | None, seed: int, out: Path
) -> RunSpec:
    """The spec of `rlbench run` (and of each nightly benchmark): workload by name or path, --steps applied."""
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    loaded = load_workload(workload)
    check_environment()  # a bad RLBENCH_* setting is refused before anything is built or launched
    return RunSpec(
        framework=framework,
        workload=loaded.with_steps(steps) if steps else loaded,
        parallel=parse_parallel(parallel),
        seed=seed,
        out=out,
        timeout_s=run_timeout_s(),
    )
