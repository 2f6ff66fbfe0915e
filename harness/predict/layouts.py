"""What `rlbench predict` plans: one layout's per-stage prediction, or every layout of a sweep ranked, with the
layouts a framework would refuse or the model cannot hold set aside.
"""

from __future__ import annotations

from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import (
    LAYOUT_AXES,  # the axes `predict --sweep` ranks
    FrameworkFloor,
    Hardware,
    ModelArch,
    ParallelShape,
    ResponseLengths,
    WorkloadShape,
    predict,
)
from rlbench.harness.predict.job_shape import launch_shape, parallel_shape, workload_shape
from rlbench.harness.predict.response_lengths import with_lengths
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload


def predict_layout(
    arch: ModelArch,
    shape: WorkloadShape,
    pairs: tuple[str, ...] | list[str],
    gpus: int,
    hardware: Hardware,
    gpu_hour_usd: float | None = None,
    floor: FrameworkFloor | None = None,
) -> dict[str, Any]:
    """Prediction for `--parallel` pairs on `gpus` devices; an invalid layout is an RLBenchError."""
    from rlbench.harness.predict.nodes import on_nodes
    from rlbench.harness.spec.parallel import check_heads, check_model_split, parse_parallel

    parsed = parse_parallel(pairs)
    check_heads(parsed, arch, arch.name)  # the same refusals as `rlbench run` and `rlbench sweep`
    check_model_split(parsed, arch, arch.name)
    hardware = on_nodes(hardware, parsed, gpus)
    try:
        layout = parallel_shape(parsed, gpus)
        return predict(arch, shape, layout, hardware, gpu_hour_usd=gpu_hour_usd, floor=floor).to_dict()
    except ValueError as exc:
        raise RLBenchError(str(exc)) from None


def sweep_layout_table(
    arch: ModelArch,
    workload: Workload,
    framework: str | None,
    pairs: tuple[str, ...] | list[str],
    grid: dict[str, list[str]],
    sweep_all: bool,
    gpus: int,
    hardware: Hardware,
    gpu_hour_usd: float | None = None,
    floor: FrameworkFloor | None = None,
    lane: bool = False,
    lengths: tuple[ResponseLengths | None, float | None] = (None, None),
) -> dict[str, Any]:
    """Rank layouts on `gpus` GPUs with `rlbench.harness.perfmodel.sweep_layouts`: {"ranked", "skipped", "notes"}.
    lane: each layout takes the framework's CPU-lane launch shape (the CPU row).

    Each axis of LAYOUT_AXES takes the values `grid` gives it, else sweep_layouts' default range when
    `sweep_all`, else its --parallel value. Every layout launches its own shape (the framework's, or
    the neutral one). With a framework, a layout it refuses (`rlbench run` would) is skipped with
    check "framework". The trainer shards as Megatron's distributed optimizer ("optimizer"), the
    backend that trainer tp, pp, cp and ep select."""
    from rlbench.harness.perfmodel import sweep_layouts
    from rlbench.harness.spec.parallel import knob_pairs, parse_parallel

    for key in grid:
        if key not in LAYOUT_AXES:
            raise RLBenchError(
                f"--sweep {key}=: predict ranks layouts over {', '.join(LAYOUT_AXES)}; fix {key} with "
                f"--parallel {key}=VALUE instead"
            )
    given = list(pairs)
    if ("pp" in grid or sweep_all) and not any(p.partition("=")[0].strip() == "pp" for p in given):
        given.append("pp=2")  # a stand-in, so that a fixed pp_virtual parses; each layout sets its own pp
    fixed = parse_parallel(given)
    axes = {axis: [_axis_value(axis, v) for v in grid[axis]] for axis in grid}
    if not sweep_all:
        axes.update({axis: [getattr(fixed, axis)] for axis in LAYOUT_AXES if axis not in grid})
    if "placement" in axes:
        axes["placements"] = axes.pop("placement")
    virtual = fixed.pp_virtual  # an interleaved base needs a pipeline: sweep_layouts applies it where pp > 1
    base = ParallelShape(  # the knobs every swept layout keeps; tp is a stand-in that a fixed etp divides
        gpus=gpus,
        tp=fixed.etp or 1,
        etp=fixed.etp,
        pp=2 if virtual > 1 else 1,
        pp_virtual=virtual,
        sharding="optimizer",
        pp_schedule="interleaved" if virtual > 1 else "1f1b",
        fuse=fixed.fuse,
        async_mode=fixed.async_mode,
        async_staleness=fixed.async_depth if fixed.async_mode == "k-step" else 1,
    )
    shapes: dict[tuple[str, ...], WorkloadShape] = {}

    def shape_for(layout: ParallelShape) -> WorkloadShape:
        key = tuple(_layout_pairs(layout, fixed))
        if key not in shapes:
            shapes[key] = with_lengths(launch_shape(workload, framework, key, lane), *lengths)
        return shapes[key]

    try:
        result = sweep_layouts(
            arch,
            workload_shape(workload),
            hardware,
            gpus,
            base=base,
            shape_for=shape_for,
            gpu_hour_usd=gpu_hour_usd,
            floor=floor,
            **axes,
        )
    except ValueError as exc:
        raise RLBenchError(str(exc)) from None
    # The framework's refusal comes first: it holds whatever the model or the memory would allow.
    skipped = []
    for item in result.skipped:
        refusal = _framework_refusal(
            framework, workload, knob_pairs({**fixed.non_default(), "pp_virtual": 1, **item.layout})
        )
        skipped.append(
            {"layout": item.layout, "check": "framework" if refusal else item.check, "reason": refusal or item.reason}
        )
    ranked = []
    for row, (layout, prediction) in zip(result.rows(), result.ranked):
        shown = {k: getattr(layout, k) for k in LAYOUT_AXES} | (
            {"pp_virtual": layout.pp_virtual} if layout.pp_virtual > 1 else {}
        )  # row["pp"] reads "2x3" then
        refusal = _framework_refusal(framework, workload, _layout_pairs(layout, fixed))
        if refusal:
            skipped.append({"layout": shown, "check": "framework", "reason": refusal})
        else:
            ranked.append({**prediction.to_dict(), **row, "rank": len(ranked) + 1, "layout": shown})
    return {
        "ranked": ranked,
        "skipped": skipped,
        "notes": [
            "trainer sharding: Megatron's distributed optimizer (the backend trainer tp, pp, cp and ep "
            "select); disaggregated layouts give the rollout half of the GPUs"
        ],
    }


def _axis_value(axis: str, raw: str) -> int | str:
    """One --sweep value, checked as --parallel checks it."""
    from rlbench.harness.spec.parallel import PLACEMENTS

    if axis == "placement":
        if raw not in PLACEMENTS:
            raise RLBenchError(f"--sweep placement={raw}: must be one of {', '.join(PLACEMENTS)}")
        return raw
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise RLBenchError(f"--sweep {axis}={raw}: {axis} must be a positive integer")
    return value


def _layout_pairs(layout: ParallelShape, fixed: Parallelism) -> list[str]:
    """The --parallel pairs of one swept layout: its axes and dp, the fixed knobs as given."""
    from rlbench.harness.spec.parallel import knob_pairs

    knobs = {
        **fixed.non_default(),
        "dp": layout.data_parallel,
        "tp": layout.tp,
        "rollout_tp": layout.rollout_tp,
        "pp": layout.pp,
        "pp_virtual": layout.pp_virtual,
        "cp": layout.cp,
        "ep": layout.ep,
        "sp": layout.sp,
        "placement": layout.placement,
    }
    return knob_pairs(knobs)


def _framework_refusal(framework: str | None, workload: Workload, pairs: list[str]) -> str | None:
    """What the framework's adapter refuses of these knobs before any launch (as `rlbench run`), or None."""
    if not framework:
        return None
    try:
        refuse_for_framework(framework, workload, pairs)
    except RLBenchError as exc:
        return str(exc)
    return None


def refuse_for_framework(framework: str, workload: Workload, pairs: tuple[str, ...] | list[str]) -> None:
    """The framework's refusal of knobs it cannot honour, whatever the machine (the adapter's `refuse_knobs`)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.harness.spec.runspec import RunSpec

    spec = RunSpec(framework=framework, workload=workload, parallel=parse_parallel(pairs))
    get_adapter(framework).refuse_knobs(spec)
