"""Predict one RL step: stages combined over the step's DAG, then throughput, MFU, memory, cost.

DAG (stage groups: generation = prefill + decode; experience = reward + ref/old log-probs +
values + advantage; training = actor + critic updates; sync = weight_sync, and a calibrated floor's
unstaged time, the framework's own work between the timed stages):
* colocated: every group runs on the same GPUs, one after another: times add.
* disaggregated, async_mode="off": separate pools, but each waits for the other: times add.
* disaggregated, async_mode="one-step" (one-step-off-policy): generation of step k+1
  overlaps training on step k; steady state max(T_gen, T_experience + T_train + T_sync).
  (One-step on a colocated layout cannot overlap, so it adds; a note says so.)
* disaggregated, async_mode="k-step" (async_staleness=k): generation runs up to k batches
  ahead; with fixed stage times the steady state is the same max (parallelism.async_step_s),
  and `staleness_steps` says how many policy versions old the trained samples are (k when
  generation is the faster side, 1 when it is the slower). The first step pays both sides.

Definitions:
* tokens_per_s = (prompt + response tokens of the global batch) / step time (HybridFlow).
* mfu = model FLOPs of the whole step (generation included, recomputation excluded) /
  (all GPUs x dense bf16 peak x step time). mfu_actor = the actor update alone on the
  trainer GPUs over its own stage time, the quantity verl logs as perf/mfu/actor.
* energy_j = TDP x GPUs x step time: an UPPER bound (boards rarely sit at TDP; host, network
  and cooling excluded).
* cost_per_mtok_usd = (GPU-hours x $/GPU-hour + kWh x $/kWh) per million batch tokens.
* step_time_s combines the stages' predicted times (roofline.py: Brent's lower bound on
  hardware that overlaps dispatch with compute, the upper bound W/p + D * t on a CPU);
  brent_lower_s and brent_upper_s combine the stages' bounds the same way. Without a measured
  op latency (every datasheet row) the upper bound is None and the step time is the roofline,
  a lower bound with achievable=1.0.
* floor: a framework's own per-step time that no hardware number prices (generate's per-token
  bookkeeping, the Trainer's optimizer step and logging, Ray and HTTP hops, the weight-sync path),
  measured by `rlbench calibrate` (floor.py) for every stage the framework logs and for the time
  outside them; when given it is added to the stages that pay it, so every figure above includes it.
* Bound and estimate, separately: step_time_bound_s is Brent's lower bound max(W/p, D t) combined
  over the DAG (on a datasheet row: the roofline at 100% of peak, what the hardware allows) and
  mfu_bound the MFU at that time, an upper bound on any run's MFU. step_time_estimate_s adds the
  overhead terms no datasheet states (overheads.py: achievable fraction of peak, per-kernel launch
  latency of the trainer's layer chain, the rollout engine's per-decode-step floor), and
  mfu_estimate is the MFU at that time. On a CPU row, whose latency and framework floor were
  measured here, the estimate is step_time_s itself. step_time_s and mfu keep their old meaning
  (the roofline prediction; the bound on GPU rows) for readers of older records.
Anything that needs an unknown number (a link, a TDP, a price, a latency) is None, never a guess.

    from rlbench.harness.perfmodel import predict, WorkloadShape, ParallelShape
    p = predict("Qwen2.5-7B-Instruct", WorkloadShape(prompts_per_step=64, group_size=8,
                prompt_len=512, response_len=1024), ParallelShape(gpus=8), "H100-SXM")
    p.step_time_s, p.tokens_per_s, p.mfu, p.to_dict()
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rlbench.harness.perfmodel.arch import ModelArch, get_arch
from rlbench.harness.perfmodel.floor import UNSTAGED, FrameworkFloor, apply_floor
from rlbench.harness.perfmodel.hardware import Hardware, get_hardware
from rlbench.harness.perfmodel.memory import MemoryEstimate, estimate_memory
from rlbench.harness.perfmodel.overheads import (
    ACHIEVABLE_FRACTION,
    ENGINE_STEP_FLOOR_S,
    FITTED,
    SOURCES,
    FittedTerms,
    engine_cost,
    engine_floor,
    engine_steps,
    engine_tokens,
    estimate_hardware,
    in_flight,
    refit_floor,
    trainer_hardware,
    trainer_mfu,
)
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.parallelism import async_staleness
from rlbench.harness.perfmodel.rollout import decode_stage, step_weight_bytes
from rlbench.harness.perfmodel.roofline import StageCost
from rlbench.harness.perfmodel.shapes import WorkloadShape
from rlbench.harness.perfmodel.stages import build_stages

GROUPS = {
    "generation": ("generation_prefill", "generation_decode"),
    "experience": ("reward", "ref_logprob", "old_logprob", "critic_values", "advantage"),
    "training": ("actor_update", "critic_update"),
    # the framework's calibrated time outside every timed stage (floor.UNSTAGED), on the trainer's side of the step
    "sync": ("weight_sync", UNSTAGED),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    arch: str
    hardware: str
    gpus: int
    stages: tuple[StageCost, ...]
    group_times_s: dict[str, float | None]
    step_time_s: float | None
    brent_lower_s: float | None
    brent_upper_s: float | None
    tokens_per_step: float
    tokens_per_s: float | None
    model_flops: float
    mfu: float | None
    mfu_actor: float | None
    memory: MemoryEstimate
    energy_j: float | None
    cost_per_mtok_usd: float | None
    achievable: float
    notes: tuple[str, ...] = ()
    peak_flops: float | None = None  # the dense peak per device that mfu divides by (bf16 on GPU rows)
    estimate_stages: tuple[StageCost, ...] = ()  # the stages with overhead terms (overheads.py)
    step_time_estimate_s: float | None = None
    mfu_estimate: float | None = None
    estimate_terms: dict[str, Any] | None = None  # which overhead terms the estimate used, with sources
    async_depth: int = 0  # generation batches ahead of the trainer (ParallelShape.async_depth)
    staleness_steps: int = 0  # policy versions between generating and training a sample (0: on-policy)
    first_step_s: float | None = None  # with asynchrony: the first step, which nothing overlaps

    @property
    def step_time_bound_s(self) -> float | None:
        """Brent's lower bound over the DAG: on a datasheet row, the roofline at 100% of peak."""
        return self.brent_lower_s

    @property
    def mfu_bound(self) -> float | None:
        """MFU at the bound's step time: no run of this shape can reach more."""
        bound = self.step_time_bound_s
        return None if not bound or not self.peak_flops else self.model_flops / (self.gpus * self.peak_flops * bound)

    @property
    def memory_per_gpu_gb(self) -> float:
        return self.memory.per_gpu_gb

    def stage(self, name: str) -> StageCost:
        return next(s for s in self.stages if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        estimates = {s.name: s.time_s for s in self.estimate_stages}
        stages = [{**s.to_dict(), "bound_s": s.brent_lower_s, "estimate_s": estimates.get(s.name)} for s in self.stages]
        return {
            "arch": self.arch,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "stages": stages,
            "group_times_s": dict(self.group_times_s),
            "step_time_bound_s": self.step_time_bound_s,
            "step_time_estimate_s": self.step_time_estimate_s,
            "mfu_bound": self.mfu_bound,
            "mfu_estimate": self.mfu_estimate,
            "group_times_estimate_s": _group(list(self.estimate_stages), "time_s") if self.estimate_stages else None,
            "tokens_per_s_estimate": _ratio(self.tokens_per_step, self.step_time_estimate_s),
            "estimate_terms": self.estimate_terms,
            "step_time_s": self.step_time_s,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_s": self.tokens_per_s,
            "model_flops": self.model_flops,
            "mfu": self.mfu,
            "mfu_actor": self.mfu_actor,
            "memory_per_gpu_gb": self.memory.per_gpu_gb,
            "memory_breakdown_gb": dict(self.memory.breakdown_gb),
            "memory_fits": self.memory.fits,
            "energy_j": self.energy_j,
            "energy_is_upper_bound": True,
            "cost_per_mtok_usd": self.cost_per_mtok_usd,
            "achievable": self.achievable,
            "brent": {"lower_s": self.brent_lower_s, "upper_s": self.brent_upper_s},
            "peak_flops_per_device": self.peak_flops,
            "notes": list(self.notes),
            # only with asynchrony, so that a synchronous prediction's JSON is as before
            **(
                {
                    "async": {
                        "depth": self.async_depth,
                        "staleness_steps": self.staleness_steps,
                        "first_step_s": self.first_step_s,
                    }
                }
                if self.async_depth
                else {}
            ),
        }


def combine_stages(stages: list[StageCost], parallel: ParallelShape) -> float | None:
    """A step's time from its stages' times, over the layout's DAG (the module docstring): groups add, except
    that an asynchronous rollout pool of its own overlaps generation with the rest."""
    overlap = parallel.async_depth > 0 and parallel.placement == "disaggregated"
    return _combine(_group(stages, "time_s"), overlap)


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _combine(groups: dict[str, float | None], overlap: bool) -> float | None:
    """Sequential groups add; one-step-off overlaps generation with the rest."""
    if not overlap:
        return _sum(list(groups.values()))
    rest = _sum([groups["experience"], groups["training"], groups["sync"]])
    if rest is None or groups["generation"] is None:
        return None
    return max(groups["generation"], rest)


def _group(stages: list[StageCost], attr: str) -> dict[str, float | None]:
    by_name = {s.name: getattr(s, attr) for s in stages}
    # the unstaged stage exists only with a calibrated floor that measured some: absent, it adds nothing
    return {
        group: _sum([by_name[n] for n in names if n in by_name or n != UNSTAGED]) for group, names in GROUPS.items()
    }


def _ratio(num: float, den: float | None) -> float | None:
    return None if not den else num / den


def estimate_stages(
    arch: ModelArch,
    shape: WorkloadShape,
    parallel: ParallelShape,
    hw: Hardware,
    achievable: float,
    stages: list[StageCost],
    fitted: FittedTerms = FITTED,
) -> tuple[list[StageCost], dict[str, Any]]:
    """The stages with the GPU overhead terms (overheads.py), and which terms were used.

    A row that measured its own latency (the CPU probe, with a calibrated framework floor) is
    already an estimate: its stages are returned as they are."""
    if hw.op_latency_s is not None:
        return stages, {"kind": "measured", "note": "CPU row: per-op latency and framework floor measured here"}
    a = achievable * ACHIEVABLE_FRACTION
    launch_row, trainer_row = estimate_hardware(hw), trainer_hardware(hw, fitted)
    with_launch = build_stages(
        arch,
        shape,
        parallel,
        launch_row,
        achievable=a,
        trainer_compute_fraction=trainer_mfu(arch) / ACHIEVABLE_FRACTION,
        trainer_hw=trainer_row,
    )
    # Decode is priced by the engine's measured per-step floor, which already holds its launches
    # (CUDA graphs replay a step in one launch), so its stage does not take the per-kernel latency.
    # It runs as many steps as the engine needs for its tokens at the sequences it holds in flight.
    steps = engine_steps(arch, shape, parallel, hw)
    plain_decode = decode_stage(arch, shape, parallel, hw, achievable=a, engine_steps=steps)
    decode = engine_cost(
        engine_floor(plain_decode, steps, shape.engine_mode),
        steps,
        engine_tokens(shape, parallel),
        fitted,
        shape.engine_mode,
    )
    out = [
        decode
        if s.name == "generation_decode"
        else refit_floor(s, arch, parallel, fitted)
        if s.name == "weight_sync"
        else s
        for s in with_launch
    ]
    terms = {
        "kind": "gpu_overheads",
        "achievable_fraction": a,
        "trainer_mfu": achievable * trainer_mfu(arch),
        "engine_mode": shape.engine_mode,
        "op_latency_s": launch_row.op_latency_s,
        "trainer_op_latency_s": trainer_row.op_latency_s,
        "decode_steps": steps,
        **generation_brent(out, generation_depth(arch, shape, parallel, hw, a)),
        "sequences_in_flight": in_flight(arch, shape, parallel, hw),
        "decode_step_s": fitted.decode_step_s.get(shape.engine_mode, 0.0),
        "decode_token_s": fitted.decode_token_s.get(shape.engine_mode, 0.0),
        "refit_bytes_per_s": fitted.refit_bytes_per_s,
        "trainer_unit_s": fitted.trainer_unit_s,
        "fitted_on": list(fitted.fitted_on),
        "sources": dict(SOURCES),
    }
    return out, terms


def generation_brent(stages: list[StageCost], depth: dict[str, float]) -> dict[str, float]:
    """Brent's bounds for generation apart: its work over the rollout pool W/p (prefill and decode at the
    estimate's achievable fraction: the larger of compute, memory and links, the batch spread over every
    engine) and its depth D (generation_depth), so max(W/p, D) <= generation <= W/p + D for a greedy schedule.
    Where D reaches W/p, more GPUs stop helping generation."""
    work = sum(
        max(s.compute_time_s, s.memory_time_s, s.comm_time_s or 0.0)
        for s in stages
        if s.name in ("generation_prefill", "generation_decode")
    )
    d = depth["generation_depth_s"]
    return {
        **depth,
        "generation_work_s": work,
        "generation_brent_lower_s": max(work, d),
        "generation_brent_upper_s": work + d,
    }


def generation_depth(
    arch: ModelArch, shape: WorkloadShape, parallel: ParallelShape, hw: Hardware, achievable: float
) -> dict[str, float]:
    """Generation's depth term D: the decode steps to the batch's longest response (ParallelShape.decode_depth)
    times the least one step can take, a lone sequence's (its engine's weight shard read once, or the engine's
    per-step floor). No GPU count shortens it: generation takes at least this, Brent's D beside the work W/p."""
    per_step = max(
        ENGINE_STEP_FLOOR_S[shape.engine_mode],
        step_weight_bytes(arch, 1, shape.dtype_bytes) / (parallel.rollout_tp * hw.hbm_bytes_per_s * achievable),
    )
    depth_steps = parallel.decode_depth(shape)
    return {
        "decode_depth_steps": depth_steps,
        "decode_step_least_s": per_step,
        "generation_depth_s": depth_steps * per_step,
    }


def predict(
    arch: ModelArch | str,
    shape: WorkloadShape,
    parallel: ParallelShape,
    hardware: Hardware | str,
    *,
    gpu_hour_usd: float | None = None,
    kwh_usd: float = 0.0,
    achievable: float = 1.0,
    floor: FrameworkFloor | None = None,
    fitted: FittedTerms = FITTED,
) -> Prediction:
    """Predict one steady-state RL step; see the module docstring for every definition.

    floor: a framework's measured per-step floor (floor.py), added to the stages that pay it."""
    arch = get_arch(arch) if isinstance(arch, str) else arch
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if not isinstance(achievable, (int, float)) or not 0 < achievable <= 1:
        raise ValueError(f"achievable={achievable!r}: must be in (0, 1]")
    if kwh_usd < 0 or (gpu_hour_usd is not None and gpu_hour_usd < 0):
        raise ValueError("gpu_hour_usd and kwh_usd must not be negative")
    notes: list[str] = []

    def stages_of(layout: ParallelShape) -> list[StageCost]:
        built = build_stages(arch, shape, layout, hw, achievable=achievable)
        return apply_floor(built, floor, shape.longest_response(shape.sequences)) if floor is not None else built

    stages = stages_of(parallel)
    if floor is not None:
        notes.append(f"includes the framework floor measured by {floor.source or 'calibration runs'}")
    depth = parallel.async_depth
    overlap = depth > 0 and parallel.placement == "disaggregated"
    if depth and not overlap:
        notes.append(
            f"async_mode={parallel.async_mode!r} ignored for timing: colocated pools share the GPUs, so stages add"
        )
    estimated, terms = estimate_stages(arch, shape, parallel, hw, achievable, stages, fitted)
    step_estimate = _combine(_group(estimated, "time_s"), overlap)
    groups = _group(stages, "time_s")
    step = _combine(groups, overlap)
    lower = _combine(_group(stages, "brent_lower_s"), overlap)
    upper = _combine(_group(stages, "brent_upper_s"), overlap)
    if step is None:
        notes.append(f"step time n/a: a collective crosses a link {hw.name} gives no bandwidth for")
    staleness, first = _asynchrony(groups, depth, overlap)
    if first is not None and parallel.batches_in_flight > 1:
        # the first batch has no other batch to share the engine's steps with: it decodes alone
        alone = stages_of(replace(parallel, async_mode="one-step", async_staleness=1))
        first = _combine(_group(alone, "time_s"), False)
    model_flops = sum(s.model_flops for s in stages)
    actor = next(s for s in stages if s.name == "actor_update")
    mfu_actor = _ratio(
        actor.model_flops, None if actor.time_s is None else parallel.trainer_gpus * hw.bf16_flops * actor.time_s
    )
    memory = estimate_memory(arch, shape, parallel, hw)
    if memory.fits is False:
        notes.append(f"needs {memory.per_gpu_gb:.1f} GB per GPU, more than {hw.name}'s {hw.hbm_bytes / 1e9:.0f} GB")
    energy = None if step is None or hw.tdp_w is None else hw.tdp_w * parallel.gpus * step
    price = gpu_hour_usd if gpu_hour_usd is not None else hw.usd_per_gpu_hour
    cost = None
    if step is not None and price is not None and (kwh_usd == 0 or energy is not None):
        dollars = parallel.gpus * step / 3600 * price + (kwh_usd * energy / 3.6e6 if kwh_usd else 0.0)
        cost = dollars / (shape.tokens_per_step / 1e6)
    return Prediction(
        arch=arch.name,
        hardware=hw.name,
        gpus=parallel.gpus,
        stages=tuple(stages),
        group_times_s=groups,
        step_time_s=step,
        brent_lower_s=lower,
        brent_upper_s=upper,
        tokens_per_step=shape.tokens_per_step,
        tokens_per_s=_ratio(shape.tokens_per_step, step),
        model_flops=model_flops,
        mfu=_ratio(model_flops, None if step is None else parallel.gpus * hw.bf16_flops * step),
        mfu_actor=mfu_actor,
        memory=memory,
        energy_j=energy,
        cost_per_mtok_usd=cost,
        achievable=float(achievable),
        notes=tuple(notes),
        peak_flops=hw.bf16_flops,
        estimate_stages=tuple(estimated),
        step_time_estimate_s=step_estimate,
        mfu_estimate=_ratio(
            model_flops, None if step_estimate is None else parallel.gpus * hw.bf16_flops * step_estimate
        ),
        estimate_terms=terms,
        async_depth=depth,
        staleness_steps=staleness,
        first_step_s=first,
    )


def _asynchrony(groups: dict[str, float | None], depth: int, overlap: bool) -> tuple[int, float | None]:
    """(staleness in policy versions, first step's time) of an asynchronous layout (parallelism.py)."""
    if not depth:
        return 0, None
    first = _combine(groups, False)
    if not overlap:
        return depth, first  # the framework still trains on samples up to `depth` versions old
    rest = _sum([groups["experience"], groups["training"], groups["sync"]])
    if rest is None or groups["generation"] is None:
        return depth, first
    return async_staleness(groups["generation"], rest, depth), first
