"""Sweep parallel layouts: combinations of ParallelShape fields, ranked by predicted step time.

A combination ParallelShape rejects (e.g. tp*pp*sp not dividing the trainer's GPUs) is skipped
with its reason; pass a list as `skipped` to collect (combination, reason) pairs. Unless `dp`
is itself in the grid it is re-derived for each combination, so sweeping `gpus` or `tp` works.
Predictions without a step time (an unknown link) rank last; equal times rank by memory per GPU.

    from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, sweep
    work = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)
    skipped = []
    ranked = sweep(ParallelShape(gpus=16), {"tp": [1, 2, 4], "rollout_tp": [1, 2]},
                   arch="Qwen2.5-7B-Instruct", shape=work, hardware="H100-SXM", skipped=skipped)
    best_layout, best = ranked[0]

`sweep_layouts` is the whole-taxonomy sweep for one model and GPU count: tp x pp x cp x ep x sp x
rollout_tp x placement, each refused layout with the check that refused it (experts, heads,
layers, gpus, memory) and one line saying why:

    result = sweep_layouts("Qwen3-30B-A3B", work, "H100-SXM", 16)
    result.rows()[0], result.skipped[0].check, result.skipped[0].reason
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlbench.harness.perfmodel.arch import ModelArch, get_arch
from rlbench.harness.perfmodel.hardware import Hardware, get_hardware
from rlbench.harness.perfmodel.names import lookup
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.predict import Prediction, predict
from rlbench.harness.perfmodel.shapes import WorkloadShape

FIELDS = tuple(f.name for f in dataclasses.fields(ParallelShape))
# The layout axes `sweep_layouts` ranks, in the order of its arguments; every other field is fixed by `base`.
LAYOUT_AXES = ("tp", "pp", "cp", "ep", "sp", "rollout_tp", "placement")


def sweep(
    base_parallel: ParallelShape,
    grid: dict[str, list[Any]],
    *,
    arch: ModelArch | str,
    shape: WorkloadShape,
    hardware: Hardware | str,
    skipped: list[tuple[dict[str, Any], str]] | None = None,
    **predict_kwargs: Any,
) -> list[tuple[ParallelShape, Prediction]]:
    """Predict every valid combination of `grid` applied to `base_parallel`; fastest estimate first."""
    for key in grid:
        lookup({f: f for f in FIELDS}, key, "ParallelShape field")  # did-you-mean on a typo
        if key not in FIELDS:  # matched only loosely (case, punctuation): insist on the real name
            raise ValueError(f"sweep grid key {key!r}: use the field name exactly ({', '.join(FIELDS)})")
    keys = list(grid)
    base = {f: getattr(base_parallel, f) for f in FIELDS}
    if "dp" not in grid:
        base["dp"] = None
    results: list[tuple[ParallelShape, Prediction]] = []
    for values in itertools.product(*(grid[k] for k in keys)):
        combo = dict(zip(keys, values))
        try:
            layout = ParallelShape(**{**base, **combo})
        except ValueError as exc:
            if skipped is not None:
                skipped.append((combo, str(exc)))
            continue
        results.append((layout, predict(arch, shape, layout, hardware, **predict_kwargs)))
    results.sort(key=lambda pair: rank_key(pair[1]))
    return results


def rank_key(p: Prediction) -> tuple[bool, bool, float, float]:
    """Order of a ranking: by the estimate, which is what a run should take; by the roofline bound only where no
    layout has an estimate (the bound is what no run can beat, and ranking by it put a 7B GRPO's 122 s layout
    above an 87.7 s one). Ties (a compute-bound model does not care how the same GPUs split) go to less memory."""
    estimate = p.step_time_estimate_s
    return (
        estimate is None and p.step_time_s is None,
        estimate is None,
        estimate if estimate is not None else (p.step_time_s or 0.0),
        p.memory_per_gpu_gb,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class SkippedLayout:
    """A layout the sweep did not predict: which check refused it and why, in one line."""

    layout: dict[str, Any]
    check: str  # one of SKIP_CHECKS
    reason: str


# Why a layout is skipped, in the order the checks run (the first that fails is reported).
SKIP_CHECKS = ("experts", "heads", "layers", "gpus", "memory")


@dataclass(frozen=True, kw_only=True, slots=True)
class LayoutSweep:
    ranked: tuple[tuple[ParallelShape, Prediction], ...]  # fastest estimate first (rank_key); ties: less memory
    skipped: tuple[SkippedLayout, ...]

    def rows(self) -> list[dict[str, Any]]:
        """One dict per ranked layout, keys TABLE_COLUMNS (units in the names; None: n/a)."""
        return [_row(rank, layout, p) for rank, (layout, p) in enumerate(self.ranked, 1)]


# Columns of the ranked table, with units; lower is better for times and memory, higher for tokens/s and MFU.
TABLE_COLUMNS = (
    "rank",
    "tp",
    "pp",
    "cp",
    "ep",
    "sp",
    "rollout_tp",
    "placement",
    "async",
    "step_time_bound_s",
    "step_time_estimate_s",
    "tokens_per_s_bound",
    "mfu_bound",
    "memory_per_gpu_gb",
    "slowest_stage",
)


def _row(rank: int, layout: ParallelShape, p: Prediction) -> dict[str, Any]:
    timed = [s for s in p.stages if s.time_s is not None]
    return {
        "rank": rank,
        "tp": layout.tp,
        "pp": layout.pp if layout.pp_virtual == 1 else f"{layout.pp}x{layout.pp_virtual}",
        "cp": layout.cp,
        "ep": layout.ep,
        "sp": layout.sp,
        "rollout_tp": layout.rollout_tp,
        "placement": layout.placement,
        "async": layout.async_mode,
        "step_time_bound_s": p.step_time_bound_s,
        "step_time_estimate_s": p.step_time_estimate_s,
        "tokens_per_s_bound": p.tokens_per_s,
        "mfu_bound": p.mfu_bound,
        "memory_per_gpu_gb": p.memory_per_gpu_gb,
        "slowest_stage": max(timed, key=lambda s: s.time_s).name if timed else None,
    }


def _refusal(arch: ModelArch, combo: dict[str, Any]) -> tuple[str, str] | None:
    """(check, reason) when the model's shape cannot take the layout; None when it can."""
    tp, pp, cp, ep, sp, rtp, v = (combo[k] for k in ("tp", "pp", "cp", "ep", "sp", "rollout_tp", "pp_virtual"))
    if ep > 1 and not arch.is_moe:
        return "experts", f"ep={ep}: {arch.name} is dense, it has no experts to split"
    if ep > 1 and arch.moe_experts % ep:
        return "experts", f"ep={ep} does not divide {arch.name}'s {arch.moe_experts} experts"
    # Megatron splits query and KV heads evenly over TP ranks (num_query_groups % tp == 0).
    if arch.heads % tp or arch.kv_heads % tp:
        which = f"{arch.heads} attention heads" if arch.heads % tp else f"{arch.kv_heads} KV heads"
        return "heads", (
            f"tp={tp} does not divide {arch.name}'s {which} (Megatron splits query and KV heads "
            "evenly over the trainer's TP ranks)"
        )
    # Ulysses scatters heads (KV heads repeated when fewer); the ring (cp) splits the sequence, not heads.
    if arch.heads % sp or (arch.kv_heads % sp and sp % arch.kv_heads):
        return "heads", f"sp={sp} cannot scatter {arch.name}'s {arch.heads} heads / {arch.kv_heads} KV heads"
    # vLLM gives each rank heads/tp query heads and divides or replicates the KV heads.
    if arch.heads % rtp or (arch.kv_heads % rtp and rtp % arch.kv_heads):
        return "heads", f"rollout_tp={rtp} cannot split {arch.name}'s {arch.heads} heads / {arch.kv_heads} KV heads"
    if arch.layers % (pp * v):
        chunks = f"pp x pp_virtual = {pp * v}" if v > 1 else f"pp={pp}"
        return "layers", f"{chunks} does not divide {arch.name}'s {arch.layers} layers"
    return None


def sweep_layouts(
    arch: ModelArch | str,
    shape: WorkloadShape,
    hardware: Hardware | str,
    gpus: int,
    *,
    tp: Sequence[int] = (1, 2, 4, 8),
    pp: Sequence[int] = (1, 2, 4),
    cp: Sequence[int] = (1, 2, 4),
    ep: Sequence[int] = (1, 2, 4, 8),
    sp: Sequence[int] = (1,),
    rollout_tp: Sequence[int] = (1, 2, 4, 8),
    placements: Sequence[str] = ("colocated", "disaggregated"),
    rollout_fraction: float = 0.5,
    base: ParallelShape | None = None,
    keep_unfit: bool = False,
    shape_for: Callable[[ParallelShape], WorkloadShape] | None = None,
    **predict_kwargs: Any,
) -> LayoutSweep:
    """Rank every layout of the grid on `gpus` GPUs for one model; say which were skipped and why.

    The grid is tp x pp x cp x ep x sp x rollout_tp x placement; `base` carries the other knobs
    (sharding, async_mode, pp_schedule/pp_virtual, fuse, ep_capacity_factor). Disaggregated layouts
    give the rollout `rollout_fraction` of the GPUs (verl's and OpenRLHF's usual half). A layout is
    skipped (SkippedLayout.check) when the model cannot take it (experts, heads, layers), the GPUs
    cannot (gpus: the products do not divide them; ep not dividing dp x sp x cp), or it needs more
    memory than the device has (memory; keep_unfit=True ranks those too). `shape_for`, when given,
    returns the workload shape each layout launches (e.g. an engine memory share that follows the
    placement); `shape` is used otherwise."""
    model = get_arch(arch) if isinstance(arch, str) else arch
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if not 0 < rollout_fraction < 1:
        raise ValueError(f"rollout_fraction={rollout_fraction!r}: must be in (0, 1)")
    fixed = {f: getattr(base, f) for f in FIELDS} if base is not None else {}
    fixed.update(gpus=gpus, dp=None)
    ranked: list[tuple[ParallelShape, Prediction]] = []
    skipped: list[SkippedLayout] = []
    for values in itertools.product(tp, pp, cp, ep, sp, rollout_tp, placements):
        combo = dict(zip(LAYOUT_AXES, values, strict=True))
        combo["pp_virtual"] = fixed.get("pp_virtual", 1) if combo["pp"] > 1 else 1
        refusal = _refusal(model, combo)
        shown = {k: v for k, v in combo.items() if k != "pp_virtual" or v > 1}
        if refusal is None:
            try:
                extra = {"rollout_gpus": int(gpus * rollout_fraction) if combo["placement"] == "disaggregated" else 0}
                if combo["pp"] == 1:  # an interleaved base cannot apply to a layout without a pipeline
                    extra["pp_schedule"] = "1f1b"
                layout = ParallelShape(**{**fixed, **combo, **extra})
            except ValueError as exc:
                refusal = ("gpus", str(exc))
        if refusal is not None:
            skipped.append(SkippedLayout(layout=shown, check=refusal[0], reason=refusal[1]))
            continue
        prediction = predict(model, shape_for(layout) if shape_for else shape, layout, hw, **predict_kwargs)
        if prediction.memory.fits is False and not keep_unfit:
            skipped.append(
                SkippedLayout(
                    layout=shown,
                    check="memory",
                    reason=(
                        f"needs {prediction.memory_per_gpu_gb:.1f} GB per GPU, more than {hw.name}'s "
                        f"{hw.hbm_bytes / 1e9:.0f} GB"
                    ),
                )
            )  # type: ignore[operator]
            continue
        ranked.append((layout, prediction))
    ranked.sort(key=lambda pair: rank_key(pair[1]))
    return LayoutSweep(ranked=tuple(ranked), skipped=tuple(skipped))
