"""RunSpec: everything that defines one benchmark run, resolved before launch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rlbench.parallel import Parallelism
from rlbench.workloads.spec import Workload


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    framework: str
    workload: Workload
    parallel: Parallelism
    seed: int = 0
    out: Path = Path("results")
    timeout_s: float = 7200.0

    def to_dict(self) -> dict[str, object]:
        return {
            "framework": self.framework,
            "workload": dataclasses.asdict(self.workload),
            "parallel": self.parallel.to_dict(),
            "seed": self.seed,
            "timeout_s": self.timeout_s,
        }
