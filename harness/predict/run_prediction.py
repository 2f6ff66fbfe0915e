"""Connect runs to the work-depth model: predict a run's exact configuration, compare with it.

Turns rlbench's workload, parallelism, model and machine into the pure model's
inputs (`rlbench.harness.perfmodel`), and a finished run's summary into measured/predicted
ratios per stage. CPU runs use the peaks measured on this machine (`cpu_probe`);
a GPU missing from the cited hardware table gives no prediction ("n/a"), never a
guessed peak. Where `rlbench calibrate` measured the framework's per-step floor on this
machine, the prediction includes it (floor_cache.py).

    rlbench predict --model-config Qwen/Qwen2.5-7B-Instruct --workload math-grpo --hardware H100-SXM --gpus 8
    rlbench predict --model-config Qwen3-30B-A3B --workload math-grpo --hardware H100-SXM --gpus 16 --sweep all
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import (
    FrameworkFloor,
    Hardware,
    ModelArch,
    ParallelShape,
    Prediction,
    WorkloadShape,
    find_hardware,
    predict,
)
from rlbench.harness.perfmodel.shapes import NEUTRAL_MICRO_BATCH_TOKENS
from rlbench.harness.perfmodel.sweep import LAYOUT_AXES  # the axes `predict --sweep` ranks
from rlbench.harness.predict.floor_cache import load_floor
from rlbench.harness.spec.model_arch import arch_for
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload

# rlbench's measured stage columns -> the model's stages that make them up.
STAGE_MAP: dict[str, tuple[str, ...]] = {
    "gen": ("generation_prefill", "generation_decode"),
    "reward": ("reward",),
    "old_log_prob": ("old_logprob",),
    "ref": ("ref_logprob",),
    "values": ("critic_values",),
    "adv": ("advantage",),
    "update_actor": ("actor_update",),
    "update_critic": ("critic_update",),
    "weight_sync": ("weight_sync",),
}


def workload_shape(
    workload: Workload, *, prompt_len: float | None = None, recompute_old_logprob: bool = True
) -> WorkloadShape:
    """The model's view of a workload; prompt_len defaults to the workload's maximum."""
    return WorkloadShape(
        prompts_per_step=workload.prompts_per_step,
        group_size=workload.algorithm.group_size,
        prompt_len=max(1, round(prompt_len if prompt_len is not None else workload.max_prompt_length)),
        response_len=workload.max_response_length,
        algorithm=workload.algorithm.name,
        use_kl_reference=workload.algorithm.kl_coef > 0,
        recompute_old_logprob=recompute_old_logprob,
        ppo_epochs=workload.algorithm.epochs,
        mini_batch_prompts=workload.mini_batch_prompts,
        gradient_checkpointing=workload.gradient_checkpointing,
        fixed_length=workload.fixed_length,
    )


def neutral_fields(shape: WorkloadShape, parallel: Parallelism | None = None) -> dict[str, Any]:
    """The launch shape without a framework: token-packed micro-batches of NEUTRAL_MICRO_BATCH_TOKENS
    per GPU (never below one whole sequence), as verl's and OpenRLHF's dynamic batching packs them,
    and a CUDA-graph vLLM engine with the equal-work contract's limits (256 sequences; half of a
    colocated GPU, 0.9 of a rollout GPU of its own) where the placement is known."""
    from rlbench.harness.spec.equal_work import GPU_MEMORY_COLOCATED, GPU_MEMORY_DEDICATED, MAX_NUM_SEQS

    fields: dict[str, Any] = {
        "micro_batch_tokens": max(NEUTRAL_MICRO_BATCH_TOKENS, shape.max_seq_len),
        "engine_mode": "cuda_graphs",
        "engine_max_seqs": MAX_NUM_SEQS,
    }
    if parallel is not None:
        fields["engine_memory_fraction"] = (
            GPU_MEMORY_COLOCATED if parallel.placement == "colocated" else GPU_MEMORY_DEDICATED
        )
    return fields


def framework_fields(framework: str, workload: Workload, parallel: Parallelism, lane: bool = False) -> dict[str, Any]:
    """What a framework's launch fixes beyond the workload: its adapter's `model_shape` (micro-batching,
    packing, KV cache, dtype) and the rollout engine's mode from the equal-work contract every adapter
    launches with (CUDA graphs unless enforce_eager; Hugging Face generate, kv_cache "concat", is eager)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.spec.runspec import RunSpec

    fields = get_adapter(framework).launch_shape(
        RunSpec(framework=framework, workload=workload, parallel=parallel), lane
    )
    return {**fields, **engine_fields(workload, parallel, fields)}


def launch_shape(
    workload: Workload, framework: str | None, pairs: tuple[str, ...] | list[str], lane: bool = False
) -> WorkloadShape:
    """The workload as launched with these `--parallel` pairs: the framework's launch shape (its CPU lane's
    where `lane`, i.e. on the CPU row), or the neutral one without a framework. A bad pair is an
    RLBenchError, as for `rlbench run`."""
    from rlbench.harness.spec.parallel import parse_parallel

    parallel = parse_parallel(pairs)
    shape = workload_shape(workload)
    fields = framework_fields(framework, workload, parallel, lane) if framework else neutral_fields(shape, parallel)
    return dataclasses.replace(shape, **fields)


def engine_fields(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> dict[str, Any]:
    """The rollout engine's mode and limits as every adapter launches it (the equal-work contract)."""
    from rlbench.harness.spec.equal_work import contract

    engine = contract(workload, parallel).engine
    if fields.get("kv_cache") == "concat":  # Hugging Face generate: eager, the whole batch at once
        return {"engine_mode": "eager"}
    return {
        "engine_mode": engine_mode(workload, parallel, fields),
        "engine_max_seqs": engine.max_num_seqs,
        "engine_memory_fraction": engine.gpu_memory_utilization,
    }


def engine_mode(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> str:
    """'eager' for Hugging Face generate (no paged cache) or an engine launched with enforce_eager."""
    from rlbench.harness.spec.equal_work import contract

    if fields.get("kv_cache") == "concat" or contract(workload, parallel).engine.enforce_eager:
        return "eager"
    return "cuda_graphs"


def parallel_shape(parallel: Parallelism, gpus: int | None = None) -> ParallelShape:
    """The model's view of the knobs, each straight through; dp is derived when gpus is given.

    Disaggregated placement gives the rollout half of the GPUs (verl's and OpenRLHF's usual split).
    pp_virtual > 1 is Megatron's interleaved schedule; async=K is k-step with staleness K. Sharding
    follows the backend the knobs select: trainer tp, pp, cp or ep is Megatron's distributed
    optimizer ("optimizer"), otherwise FSDP ("full").
    """
    total = gpus or parallel.world_size
    rollout_gpus = total // 2 if parallel.placement == "disaggregated" else 0
    shape = ParallelShape(
        gpus=total,
        dp=None if gpus else parallel.dp,
        tp=parallel.tp,
        pp=parallel.pp,
        pp_schedule="interleaved" if parallel.pp_virtual > 1 else "1f1b",
        pp_virtual=parallel.pp_virtual,
        cp=parallel.cp,
        ep=parallel.ep,
        etp=parallel.etp,
        sp=parallel.sp,
        rollout_tp=parallel.rollout_tp,
        placement=parallel.placement,
        rollout_gpus=rollout_gpus,
        sharding="optimizer" if parallel.megatron_knobs else "full",
        fuse=parallel.fuse,
        async_mode=parallel.async_mode,
        async_staleness=parallel.async_depth if parallel.async_mode == "k-step" else 1,
    )
    if gpus and "dp" in parallel.non_default() and shape.data_parallel != parallel.dp:
        raise RLBenchError(
            f"--parallel dp={parallel.dp} does not agree with --gpus {gpus}: the trainer's "
            f"{shape.trainer_gpus} GPUs over tp x pp x sp x cp = {shape.tp * shape.pp * shape.sp * shape.cp} "
            f"give dp={shape.data_parallel}; drop dp (it follows from --gpus) or set --gpus to match"
        )
    return shape


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
    from rlbench.harness.spec.parallel import check_heads, check_model_split, parse_parallel

    parsed = parse_parallel(pairs)
    check_heads(parsed, arch, arch.name)  # the same refusals as `rlbench run` and `rlbench sweep`
    check_model_split(parsed, arch, arch.name)
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
) -> dict[str, Any]:
    """Rank layouts on `gpus` GPUs with `rlbench.harness.perfmodel.sweep_layouts`: {"ranked", "skipped", "notes"}.
    lane: each layout takes the framework's CPU-lane launch shape (the CPU row).

    Each axis of LAYOUT_AXES takes the values `grid` gives it, else sweep_layouts' default range when
    `sweep_all`, else its --parallel value. Every layout launches its own shape (the framework's, or
    the neutral one). With a framework, a layout it refuses (`rlbench run` would) is skipped with
    check "framework". The trainer shards as Megatron's distributed optimizer ("optimizer"), the
    backend that trainer tp, pp, cp and ep select."""
    from rlbench.harness.perfmodel.sweep import sweep_layouts
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
            shapes[key] = launch_shape(workload, framework, key, lane)
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


def hardware_for(environment: dict[str, Any]) -> Hardware | None:
    """The cited row of the run's GPU, the measured CPU row on a CPU run, None for an unknown GPU."""
    if environment.get("gpus"):
        return find_hardware(environment["gpus"][0]["name"])
    from rlbench.harness.predict.cpu_probe import cpu_row

    return cpu_row()  # peaks and per-op latency measured on this machine, cached


def predict_run(
    workload: Workload,
    parallel: Parallelism,
    model: str,
    environment: dict[str, Any],
    *,
    prompt_len: float | None,
    recompute_old_logprob: bool,
    shape_fields: dict[str, Any] | None = None,
    framework: str | None = None,
    padded_prompt_len: float | None = None,
) -> dict[str, Any]:
    """prediction.json of a run: the model's inputs and its per-stage prediction, or why there is none.

    shape_fields: what the framework's launch fixed beyond the workload (Adapter.model_shape).
    padded_prompt_len: the measured prompt width of a left-padded batch (TRL's padded_prompt_tokens
    per response), None or NaN where the framework does not pad.
    framework: on a CPU run, with a floor cached for it on this machine (`rlbench calibrate`), the
    prediction includes it; "floor" says which, or why there is none (never on a GPU row).
    Without shape_fields the neutral launch shape (neutral_fields) is used."""
    try:
        arch = arch_for(model)
    except RLBenchError as exc:
        return {"available": False, "reason": f"no architecture for model '{model}': {exc}"}
    hardware = hardware_for(environment)
    if hardware is None:
        gpu = environment["gpus"][0]["name"]
        return {"available": False, "reason": f"GPU '{gpu}' is not in rlbench's cited hardware table"}
    gpus = parallel.world_size if environment.get("gpus") else 1  # a CPU run is one device
    shape = workload_shape(workload, prompt_len=prompt_len, recompute_old_logprob=recompute_old_logprob)
    if shape_fields is None:  # no framework's launch: the documented neutral shape, never one sequence per micro-batch
        shape_fields = neutral_fields(shape, parallel)
    elif "engine_mode" not in shape_fields:
        shape_fields = {**shape_fields, **engine_fields(workload, parallel, shape_fields)}
    shape = dataclasses.replace(shape, **shape_fields)
    if padded_prompt_len is not None and not math.isnan(padded_prompt_len):
        shape = dataclasses.replace(shape, padded_prompt_len=max(shape.prompt_len, round(padded_prompt_len)))
    if not framework:
        floor, why_not = None, "no framework given"
    elif environment.get("gpus"):  # measured on this machine's CPU: a CPU-row feature only
        floor, why_not = None, f"no framework floor on {hardware.name}: `rlbench calibrate` measures it on the CPU"
    else:
        floor, why_not = load_floor(framework)
    result: Prediction = predict(arch, shape, parallel_shape(parallel, gpus), hardware, floor=floor)
    return {
        "available": True,
        "hardware": hardware.name,
        "hardware_source": hardware.source,
        "inputs": {
            "prompt_len": shape.prompt_len,
            "padded_prompt_len": shape.padded_prompt_len,
            "response_len": shape.response_len,
            "gpus": gpus,
            **(shape_fields or {}),
        },
        "floor": floor.to_dict() if floor else {"reason": why_not},
        **result.to_dict(),
    }


def measured_vs_predicted(summary: dict[str, Any], prediction: dict[str, Any]) -> dict[str, Any]:
    """Per stage measured/predicted (the efficiency vs the model, >1 = slower than predicted) and the bubble.

    bubble = 1 - W / (p * T_measured), with W the model's work in device-seconds
    (sum over stages of predicted time x devices of the stage) and p the devices.
    """
    if not prediction.get("available"):
        return {}
    stages = {s["name"]: s for s in prediction["stages"]}
    out: dict[str, Any] = {"stages": {}}
    for column, names in STAGE_MAP.items():
        measured = summary.get(f"time_{column}_s", {}).get("median")
        times = [stages[n]["time_s"] for n in names if n in stages]
        predicted = sum(times) if times and None not in times else None
        if measured is not None and predicted:
            out["stages"][column] = {
                "measured_s": measured,
                "predicted_s": predicted,
                "floor_s": sum(stages[n].get("floor_s", 0.0) for n in names if n in stages),
                "measured_over_predicted": measured / predicted,
                **_over_estimate(measured, [stages[n].get("estimate_s") for n in names if n in stages]),
            }
    step = summary.get("step_time_s", {}).get("median")
    if step and prediction.get("step_time_s"):
        out["step"] = {
            "measured_s": step,
            "predicted_s": prediction["step_time_s"],
            "measured_over_predicted": step / prediction["step_time_s"],
            **_over_estimate(step, [prediction.get("step_time_estimate_s")]),
        }
        work = sum((s["time_s"] or 0.0) * s["gpus"] for s in prediction["stages"])
        out["bubble"] = 1 - work / (prediction["gpus"] * step)
    return out


def _over_estimate(measured: float, estimates: list[float | None]) -> dict[str, float]:
    """measured / the estimate (bound plus overhead terms) where the prediction has one (newer records)."""
    if not estimates or any(e is None for e in estimates) or not sum(estimates):  # type: ignore[arg-type]
        return {}
    total = sum(estimates)  # type: ignore[arg-type]
    return {"estimate_s": total, "measured_over_estimate": measured / total}
