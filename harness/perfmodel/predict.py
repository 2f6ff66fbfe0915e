"""Predict one RL step: stages combined over the step's DAG, then throughput, MFU, memory, cost.

DAG (stage groups: generation = prefill + decode; experience = reward + ref/old log-probs +
values + advantage; training = actor + critic updates; sync = weight_sync):
* colocated: every group runs on the same GPUs, one after another: times add.
* disaggregated, async_mode="off": separate pools, but each waits for the other: times add.
* disaggregated, async_mode="one-step" (one-step-off-policy): generation of step k+1
  overlaps training on step k; steady state max(T_gen, T_experience + T_train + T_sync).
  (One-step on a colocated layout cannot overlap, so it adds; a note says so.)

Definitions (PERF-NOTES.md conventions):
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
  bookkeeping, the Trainer's optimizer step and logging), measured by `rlbench calibrate`
  (floor.py); when given it is added to the stages that pay it, so every figure above includes it.
Anything that needs an unknown number (a link, a TDP, a price, a latency) is None, never a guess.

    from rlbench.perfmodel import predict, WorkloadShape, ParallelShape
    p = predict("Qwen2.5-7B-Instruct", WorkloadShape(prompts_per_step=64, group_size=8,
                prompt_len=512, response_len=1024), ParallelShape(gpus=8), "H100-SXM")
    p.step_time_s, p.tokens_per_s, p.mfu, p.to_dict()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlbench.perfmodel.arch import ModelArch, get_arch
from rlbench.perfmodel.floor import FrameworkFloor, apply_floor
from rlbench.perfmodel.hardware import Hardware, get_hardware
from rlbench.perfmodel.memory import MemoryEstimate, estimate_memory
from rlbench.perfmodel.roofline import StageCost
from rlbench.perfmodel.shapes import ParallelShape, WorkloadShape
from rlbench.perfmodel.stages import build_stages

GROUPS = {"generation": ("generation_prefill", "generation_decode"),
          "experience": ("reward", "ref_logprob", "old_logprob", "critic_values", "advantage"),
          "training": ("actor_update", "critic_update"), "sync": ("weight_sync",)}


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

    @property
    def memory_per_gpu_gb(self) -> float:
        return self.memory.per_gpu_gb

    def stage(self, name: str) -> StageCost:
        return next(s for s in self.stages if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "hardware": self.hardware, "gpus": self.gpus,
                "stages": [s.to_dict() for s in self.stages], "group_times_s": dict(self.group_times_s),
                "step_time_s": self.step_time_s, "tokens_per_step": self.tokens_per_step,
                "tokens_per_s": self.tokens_per_s, "model_flops": self.model_flops, "mfu": self.mfu,
                "mfu_actor": self.mfu_actor, "memory_per_gpu_gb": self.memory.per_gpu_gb,
                "memory_breakdown_gb": dict(self.memory.breakdown_gb), "memory_fits": self.memory.fits,
                "energy_j": self.energy_j, "energy_is_upper_bound": True,
                "cost_per_mtok_usd": self.cost_per_mtok_usd, "achievable": self.achievable,
                "brent": {"lower_s": self.brent_lower_s, "upper_s": self.brent_upper_s},
                "peak_flops_per_device": self.peak_flops, "notes": list(self.notes)}


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
    return {group: _sum([by_name[n] for n in names]) for group, names in GROUPS.items()}


def _ratio(num: float, den: float | None) -> float | None:
    return None if not den else num / den


def predict(arch: ModelArch | str, shape: WorkloadShape, parallel: ParallelShape, hardware: Hardware | str, *,
            gpu_hour_usd: float | None = None, kwh_usd: float = 0.0, achievable: float = 1.0,
            floor: FrameworkFloor | None = None) -> Prediction:
    """Predict one steady-state RL step; see the module docstring for every definition.

    floor: a framework's measured per-step floor (floor.py), added to the stages that pay it."""
    arch = get_arch(arch) if isinstance(arch, str) else arch
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if not isinstance(achievable, (int, float)) or not 0 < achievable <= 1:
        raise ValueError(f"achievable={achievable!r}: must be in (0, 1]")
    if kwh_usd < 0 or (gpu_hour_usd is not None and gpu_hour_usd < 0):
        raise ValueError("gpu_hour_usd and kwh_usd must not be negative")
    notes: list[str] = []
    stages = build_stages(arch, shape, parallel, hw, achievable=achievable)
    if floor is not None:
        stages = apply_floor(stages, floor, shape.response_len)
        notes.append(f"includes the framework floor measured by {floor.source or 'calibration runs'}")
    overlap = parallel.async_mode == "one-step" and parallel.placement == "disaggregated"
    if parallel.async_mode == "one-step" and not overlap:
        notes.append("async_mode='one-step' ignored for timing: colocated pools share the GPUs, so stages add")
    groups = _group(stages, "time_s")
    step = _combine(groups, overlap)
    lower = _combine(_group(stages, "brent_lower_s"), overlap)
    upper = _combine(_group(stages, "brent_upper_s"), overlap)
    if step is None:
        notes.append(f"step time n/a: a collective crosses a link {hw.name} gives no bandwidth for")
    model_flops = sum(s.model_flops for s in stages)
    actor = next(s for s in stages if s.name == "actor_update")
    mfu_actor = _ratio(actor.model_flops, None if actor.time_s is None
                       else parallel.trainer_gpus * hw.bf16_flops * actor.time_s)
    memory = estimate_memory(arch, shape, parallel, hw)
    if memory.fits is False:
        notes.append(f"needs {memory.per_gpu_gb:.1f} GB per GPU, more than {hw.name}'s {hw.hbm_bytes / 1e9:.0f} GB")
    energy = None if step is None or hw.tdp_w is None else hw.tdp_w * parallel.gpus * step
    price = gpu_hour_usd if gpu_hour_usd is not None else hw.usd_per_gpu_hour
    cost = None
    if step is not None and price is not None and (kwh_usd == 0 or energy is not None):
        dollars = parallel.gpus * step / 3600 * price + (kwh_usd * energy / 3.6e6 if kwh_usd else 0.0)
        cost = dollars / (shape.tokens_per_step / 1e6)
    return Prediction(arch=arch.name, hardware=hw.name, gpus=parallel.gpus, stages=tuple(stages),
                      group_times_s=groups, step_time_s=step, brent_lower_s=lower, brent_upper_s=upper,
                      tokens_per_step=shape.tokens_per_step, tokens_per_s=_ratio(shape.tokens_per_step, step),
                      model_flops=model_flops,
                      mfu=_ratio(model_flops, None if step is None else parallel.gpus * hw.bf16_flops * step),
                      mfu_actor=mfu_actor, memory=memory, energy_j=energy, cost_per_mtok_usd=cost,
                      achievable=float(achievable), notes=tuple(notes), peak_flops=hw.bf16_flops)
