"""What a run asks of an adapter, as four small protocols: refuse and plan; launch; read metrics and spans; say
what a CPU lane substitutes. `Adapter` (base.py) implements all four; each phase of a run (harness/run/) is
typed against the ones it uses, so a new framework's adapter can be read, and tested, role by role.

    resolve, prepare   Refuses, Launches, DescribesLane
    watch              ReadsMetrics
    finish             ReadsMetrics, Launches, DescribesLane
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.runspec import RunSpec


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the parent's environment
    files: dict[str, str] = field(default_factory=dict)  # run-folder file name -> content, written before launch

    def describe(self) -> str:
        """Human-readable form for --dry-run: env, command, then each config file."""
        lines = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        lines.append(shlex.join(self.argv))
        for name, content in self.files.items():
            lines += ["", f"# --- {name} ---", content.rstrip()]
        return "\n".join(lines)


class Refuses(Protocol):
    """Refuses, before anything launches, what the framework or this machine cannot run (one line each)."""

    name: str

    def refuse_knobs(self, spec: RunSpec) -> None: ...
    def check(self, spec: RunSpec) -> None: ...
    def check_machine(self) -> None: ...
    def version(self) -> str | None: ...
    def version_is_tested(self) -> bool: ...


class Launches(Protocol):
    """The framework's exact launch for a spec, and the work and machine it takes."""

    cluster_placement: str | None

    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan: ...
    def job_gpus(self, spec: RunSpec) -> int: ...
    def node_inputs(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> list[Path]: ...
    def launch_shape(self, spec: RunSpec, lane: bool) -> dict[str, Any]: ...
    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any] | None: ...
    def evaluation(self, spec: RunSpec) -> dict[str, Any] | None: ...


class ReadsMetrics(Protocol):
    """The framework's own logs, read into rlbench's step vocabulary and stage spans."""

    def metrics_file(self, run_dir: Path) -> Path: ...
    def read_steps(self, run_dir: Path) -> pd.DataFrame: ...
    def read_spans(self, run_dir: Path) -> pd.DataFrame | None: ...
    def read_roles(self, run_dir: Path, responses_per_step: int, steps: int) -> dict[str, Any] | None: ...


class DescribesLane(Protocol):
    """What this machine's launch substitutes for the framework's GPU launch (a CPU lane), or None."""

    def lane(self, spec: RunSpec) -> dict[str, Any] | None: ...
    def cpu_refusal(self, spec: RunSpec) -> str | None: ...
