"""The adapter interface: what every framework adapter implements.

An adapter turns a `RunSpec` into a `LaunchPlan` (the exact command, environment
and config files of the framework's own trainer), refuses knobs its framework
cannot honour before anything launches, and maps the framework's logged metrics
into rlbench's step vocabulary (`rlbench.harness.record.schema.STEP_METRICS`). The runner, not
the adapter, starts the process, enforces the timeout and writes the record.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from rlbench.adapters.roles import DescribesLane, Launches, LaunchPlan, ReadsMetrics, Refuses
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE


class Adapter(Refuses, Launches, ReadsMetrics, DescribesLane, ABC):
    """Every role a run asks of a framework (roles.py), with the defaults most frameworks share."""

    name: str  # registry name, e.g. "trl"
    distribution: str  # PyPI distribution whose version is recorded
    tested_versions: str  # PEP 440 specifier of versions rlbench was tested with
    supported_knobs: frozenset[str]  # --parallel knobs this adapter maps; others are refused
    # The README knob table's cell for a knob where it says more than "yes" (supported) or "refused" (not):
    # how the framework takes it, e.g. {"tp": "Megatron backend"}. tests/adapters/test_knob_table.py keeps
    # the README equal to these declarations.
    knob_notes: Mapping[str, str] = MappingProxyType({})
    # Capabilities the harness plans with (a sweep's Ray executor, `rlbench ls`), declared here rather than
    # kept in lists elsewhere, so a new framework states them in one place.
    brings_own_ray: bool = False  # schedules its own Ray workers: a Ray job's entrypoint then needs no GPU
    runs_on_cpu: bool = False  # its tiny workloads run on a machine without a GPU
    # Plans the framework's GPU launch whatever this machine has (`gpu_planner`): a dry run of what this
    # machine cannot run shows what a GPU machine would.
    plans_gpu: bool = False
    # How the framework places its workers over a Ray cluster's nodes (run.json cluster.placement); None: it
    # does not run on a Ray cluster.
    cluster_placement: str | None = None

    def knob_support(self, knob: str) -> str:
        """How this framework takes `--parallel knob=...`, in the README knob table's words."""
        return self.knob_notes.get(knob) or ("yes" if knob in self.supported_knobs else "refused")

    def version(self) -> str | None:
        return package_version(self.distribution)

    def version_is_tested(self) -> bool:
        version = self.version()
        return version is not None and Version(version) in SpecifierSet(self.tested_versions)

    @abstractmethod
    def usable_here(self) -> tuple[bool, str]:
        """Whether this machine can run the framework, and why not (e.g. no GPU)."""

    def refuse_knobs(self, spec: RunSpec) -> None:
        """Refuse the layouts this framework cannot honour whatever the machine (one line each, with the reason);
        `predict` asks this too, so a plan is refused for the same reasons as a run. Subclasses extend."""
        return None  # the base class's own knob check (supported_knobs) is in `check`

    def profile_launch(self, spec: RunSpec, run_dir: Path) -> dict[str, Any] | None:
        """What the framework's launch needs to run `spec.profile` (None without one). An adapter that maps a
        profiler overrides this; the base refuses, before launch, in one line."""
        if spec.profile is None:
            return None
        raise RLBenchError(
            f"--profile {spec.profile.tool}: rlbench does not yet switch on {self.name}'s profiler; "
            "run without --profile (TRL, verl and OpenRLHF map --profile torch)"
        )

    def check(self, spec: RunSpec) -> None:
        """Refuse, before launch, what this framework cannot do. Subclasses extend."""
        if spec.profile is not None:
            self.profile_launch(spec, Path(spec.out))  # a profiler it cannot run is refused before launch
        if self.version() is None:
            raise RLBenchError(
                f"framework '{self.name}' is not installed; install it with pip install 'rlbench[{self.name}]'"
            )
        for knob, value in spec.parallel.non_default().items():
            if knob not in self.supported_knobs:
                raise RLBenchError(
                    f"--parallel {knob}={value}: not supported by the {self.name} adapter; "
                    f"it supports: {', '.join(sorted(self.supported_knobs))}"
                )
        target = spec.workload.target
        if target is not None and target.evaluates and self.evaluation(spec) is None:
            raise RLBenchError(
                f"workload {spec.workload.name}: target.metric eval_accuracy needs held-out evaluation, which the "
                f"{self.name} adapter does not run; set target.metric: reward_mean"
            )
        from rlbench.harness.spec.model_arch import workload_arch
        from rlbench.harness.spec.parallel import check_heads

        model = spec.workload.model
        check_heads(spec.parallel, workload_arch(model), model.name)  # vLLM and Ulysses split heads evenly
        check_dp_split(spec)

    def cpu_refusal(self, spec: RunSpec) -> str | None:
        """Why this machine, without a GPU, cannot run `spec` (no CPU lane, or one that does not take it), one
        line; None with a GPU here, or where this machine's own launch runs it (a CPU lane's, TRL's CPU run)."""
        return None

    def gpu_planner(self) -> Adapter:
        """This adapter, planning the framework's GPU launch even on a machine without a GPU."""
        planner = copy.copy(self)
        planner.plans_gpu = True
        return planner

    def dry_run_planner(self, spec: RunSpec) -> tuple[Adapter, str | None]:
        """The adapter whose launch a dry run of `spec` prints, and one line saying what that launch is where
        this machine could not start it: a dry run plans anywhere, the GPU launch where nothing here runs it."""
        why = self.cpu_refusal(spec)
        if why is None:
            return self, None
        return self.gpu_planner(), f"this is {self.name}'s GPU launch, not one this machine runs: {why}"

    def check_machine(self) -> None:
        """Refuse a real run (not a dry run) on a machine the framework cannot use, before any record."""
        usable, why = self.usable_here()
        if not usable:
            raise RLBenchError(f"framework '{self.name}' cannot run on this machine: {why}")

    @abstractmethod
    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan:
        """The exact launch of the framework's own trainer for this spec."""

    def read_spans(self, run_dir: Path) -> pd.DataFrame | None:
        """Stage spans with their real start and end (columns SPAN_COLUMNS), where the framework's log has
        them; None where it logs durations only (the report then places stages end to end)."""
        return None

    def read_roles(self, run_dir: Path, responses_per_step: int, steps: int) -> dict[str, Any] | None:
        """Per-role busy/idle and staleness of a run with a rollout pool of its own, from the framework's real
        call spans (rlbench.harness.record.async_roles); None where it has none to read."""
        return None

    @abstractmethod
    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        """The framework's per-step metrics as rows in rlbench's vocabulary (may be partial)."""

    def model_shape(self, spec: RunSpec) -> dict[str, Any]:
        """WorkloadShape fields (perfmodel/shapes.py) that this framework's launch fixes beyond the
        workload, e.g. its micro-batch size: the model then predicts the work the framework ran."""
        return {}

    def lane_shape(self, spec: RunSpec) -> dict[str, Any]:
        """WorkloadShape fields that this framework's CPU-lane launch changes from `model_shape` (a GPU launch's),
        e.g. padding where the lane has no padding-free kernels: applied to predictions on the CPU row."""
        return {}

    def launch_shape(self, spec: RunSpec, lane: bool) -> dict[str, Any]:
        """`model_shape`, with `lane_shape` on top where the run (or prediction) is on the CPU lane."""
        return {**self.model_shape(spec), **(self.lane_shape(spec) if lane else {})}

    def lane(self, spec: RunSpec) -> dict[str, Any] | None:
        """What this machine's launch substitutes for the framework's usual one (the CPU lane's shims and
        settings, `rlbench.adapters.cpu_lane.describe`), recorded as run.json's `cpu_lane`; None if nothing."""
        return None

    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any] | None:
        """How this launch meets the equal-work contract (`rlbench.harness.spec.equal_work.manifest`: the contract, the
        framework setting that carries each term, the differences named), recorded as run.json's
        `equal_work`; with the finished run's folder, also what the framework itself resolved where it
        saves that. None for an adapter that does not map it."""
        return None

    def evaluation(self, spec: RunSpec) -> dict[str, Any] | None:
        """How this framework runs the held-out evaluation of an eval_accuracy target through its own validation
        hook: {"hook", "settings" (what the launch sets), "differences" (from harness.spec.evaluation's contract,
        named)}, recorded in run.json's `target.evaluation`; None where the target does not evaluate, or this
        adapter cannot (then `check` refuses the workload)."""
        return None

    def job_gpus(self, spec: RunSpec) -> int:
        """GPUs the run's layout takes in all (a separate rollout pool's included): a cluster's nodes must hold
        them, spread over `--parallel nodes`."""
        return spec.parallel.world_size

    def node_inputs(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> list[Path]:
        """What every node of a Ray cluster needs at the driver's paths (staged before launch where a node lacks
        it): the run's prompts and the model's folder when it is a local one. Adapters add their data file
        (converted here, before the pre-launch step would) and reward hook."""
        model = Path(inputs.model)
        held_out = [run_dir / EVAL_PROMPTS_FILE] if inputs.eval_prompts else []
        return [run_dir / "prompts.jsonl", *held_out, *([model] if model.is_dir() else [])]

    def metrics_file(self, run_dir: Path) -> Path:
        """Where the framework's raw per-step metrics land (watched for progress)."""
        return run_dir / "framework_metrics.jsonl"


class LaneAdapter(Adapter):
    """An adapter whose framework also runs, without a GPU, through its CPU lane (rlbench.adapters.cpu_lane)."""

    runs_on_cpu = True
    # torch threads the framework computes with on its CPU lane: its trainer and its vLLM engine run in Ray
    # actors, and Ray sets an actor's OMP_NUM_THREADS to its num_cpus (1 where the actor asks for none; the lane
    # leaves vLLM's own thread binding off), so every pass the model prices runs on that many threads whatever
    # the machine has. A CPU prediction of the framework uses a probe run at this count
    # (cpu_probe.cpu_row(threads=...)); None: the process's own threads.
    cpu_worker_threads: int | None = 1
    label: str  # the framework's name in a lane's refusal, e.g. "OpenRLHF"
    lane_runs: str  # what the lane runs instead of --parallel knobs, for its refusals
    # The strategies the lane has been made to run: --parallel knob -> the values it takes on the lane.
    lane_strategies: Mapping[str, frozenset[str]] = MappingProxyType({})

    @abstractmethod
    def machine_ready(self) -> tuple[bool, str]:
        """Whether the framework can train here (a GPU stack, or the CPU lane), and why not."""

    def on_lane(self) -> bool:
        """This adapter's launch is the CPU lane's: no GPU here, the lane installed, the GPU launch not asked."""
        from rlbench.adapters import cpu_lane

        return not self.plans_gpu and cpu_lane.available()

    def cpu_refusal(self, spec: RunSpec) -> str | None:
        from rlbench.adapters import cpu_lane
        from rlbench.harness.telemetry import accelerators

        if accelerators.gpu_count():
            return None
        usable, why = self.machine_ready()
        return cpu_lane.lane_refusal(spec, self.label, self.lane_runs, self.lane_strategies) if usable else why

    def check_cpu_lane(self, spec: RunSpec) -> None:
        """Refuse, before launch, what the lane has not been made to run."""
        from rlbench.adapters import cpu_lane

        refusal = cpu_lane.lane_refusal(spec, self.label, self.lane_runs, self.lane_strategies)
        if refusal:
            raise RLBenchError(refusal)


def check_dp_split(spec: RunSpec) -> None:
    """Every framework splits a mini-batch's responses evenly over its data-parallel ranks: refuse a dp that
    cannot (framework-neutral, so said once here for every adapter)."""
    w, dp = spec.workload, spec.parallel.dp
    responses = w.mini_batch_prompts * w.algorithm.group_size
    if responses % dp:
        raise RLBenchError(
            f"--parallel dp={dp}: must divide the {responses} responses of one mini-batch of workload {w.name}"
        )
