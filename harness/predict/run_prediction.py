"""Connect runs to the work-depth model: predict a run's exact configuration, compare with it.

Turns rlbench's workload, parallelism, model and machine into the pure model's
inputs (`rlbench.perfmodel`), and a finished run's summary into measured/predicted
ratios per stage. CPU runs use the peaks measured on this machine (`cpu_probe`);
a GPU missing from the cited hardware table gives no prediction ("n/a"), never a
guessed peak. Where `rlbench calibrate` measured the framework's per-step floor on this
machine, the prediction includes it (floor_cache.py).

    rlbench predict --model-config Qwen/Qwen2.5-7B-Instruct --workload math-grpo --hardware H100-SXM --gpus 8
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from rlbench.errors import RLBenchError
from rlbench.predict.floor_cache import load_floor
from rlbench.run.parallel import Parallelism
from rlbench.perfmodel import (FrameworkFloor, Hardware, ModelArch, ParallelShape, Prediction, WorkloadShape,
                               find_hardware, get_arch, load_hf_config, predict)
from rlbench.perfmodel.shapes import NEUTRAL_MICRO_BATCH_TOKENS
from rlbench.workloads.spec import ModelSpec, Workload

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


def workload_shape(workload: Workload, *, prompt_len: float | None = None, recompute_old_logprob: bool = True
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
    from rlbench.run.equal_work import GPU_MEMORY_COLOCATED, GPU_MEMORY_DEDICATED, MAX_NUM_SEQS

    fields: dict[str, Any] = {"micro_batch_tokens": max(NEUTRAL_MICRO_BATCH_TOKENS, shape.max_seq_len),
                              "engine_mode": "cuda_graphs", "engine_max_seqs": MAX_NUM_SEQS}
    if parallel is not None:
        fields["engine_memory_fraction"] = (GPU_MEMORY_COLOCATED if parallel.placement == "colocated"
                                            else GPU_MEMORY_DEDICATED)
    return fields


def framework_fields(framework: str, workload: Workload, parallel: Parallelism) -> dict[str, Any]:
    """What a framework's launch fixes beyond the workload: its adapter's `model_shape` (micro-batching,
    packing, KV cache, dtype) and the rollout engine's mode from the equal-work contract every adapter
    launches with (CUDA graphs unless enforce_eager; Hugging Face generate, kv_cache "concat", is eager)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.run.spec import RunSpec

    fields = dict(get_adapter(framework).model_shape(RunSpec(framework=framework, workload=workload,
                                                             parallel=parallel)))
    return {**fields, **engine_fields(workload, parallel, fields)}


def launch_shape(workload: Workload, framework: str | None, pairs: tuple[str, ...] | list[str]) -> WorkloadShape:
    """The workload as launched with these `--parallel` pairs: the framework's launch shape, or the
    neutral one without a framework. A bad pair is an RLBenchError, as for `rlbench run`."""
    from rlbench.run.parallel import parse_parallel

    parallel = parse_parallel(pairs)
    shape = workload_shape(workload)
    fields = framework_fields(framework, workload, parallel) if framework else neutral_fields(shape, parallel)
    return dataclasses.replace(shape, **fields)


def engine_fields(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> dict[str, Any]:
    """The rollout engine's mode and limits as every adapter launches it (the equal-work contract)."""
    from rlbench.run.equal_work import contract

    engine = contract(workload, parallel).engine
    if fields.get("kv_cache") == "concat":  # Hugging Face generate: eager, the whole batch at once
        return {"engine_mode": "eager"}
    return {"engine_mode": engine_mode(workload, parallel, fields), "engine_max_seqs": engine.max_num_seqs,
            "engine_memory_fraction": engine.gpu_memory_utilization}


def engine_mode(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> str:
    """'eager' for Hugging Face generate (no paged cache) or an engine launched with enforce_eager."""
    from rlbench.run.equal_work import contract

    if fields.get("kv_cache") == "concat" or contract(workload, parallel).engine.enforce_eager:
        return "eager"
    return "cuda_graphs"


def parallel_shape(parallel: Parallelism, gpus: int | None = None) -> ParallelShape:
    """The model's view of the knobs (trainer TP 1, rollout TP = tp); dp is derived when gpus is given.

    Disaggregated placement gives the rollout half of the GPUs (verl's and OpenRLHF's usual split).
    """
    total = gpus or parallel.world_size
    rollout_gpus = total // 2 if parallel.placement == "disaggregated" else 0
    return ParallelShape(gpus=total, dp=None if gpus else parallel.dp, tp=1, pp=parallel.pp,
                         sp=parallel.sp, rollout_tp=parallel.tp, placement=parallel.placement,
                         rollout_gpus=rollout_gpus, async_mode=parallel.async_)


def predict_layout(arch: ModelArch, shape: WorkloadShape, pairs: tuple[str, ...] | list[str], gpus: int,
                   hardware: Hardware, gpu_hour_usd: float | None = None,
                   floor: FrameworkFloor | None = None) -> dict[str, Any]:
    """Prediction for `--parallel` pairs on `gpus` devices; an invalid layout is an RLBenchError."""
    from rlbench.run.parallel import check_heads, parse_parallel

    parsed = parse_parallel(pairs)
    check_heads(parsed, arch, arch.name)  # the same refusal as `rlbench run` and `rlbench sweep`
    try:
        layout = parallel_shape(parsed, gpus)
        return predict(arch, shape, layout, hardware, gpu_hour_usd=gpu_hour_usd, floor=floor).to_dict()
    except ValueError as exc:
        raise RLBenchError(str(exc)) from None


def arch_for(model: str) -> ModelArch:
    """Architecture from a model folder's config.json, a config.json path, the Hugging Face cache's copy of
    a hub model's config.json (offline), or the built-in table."""
    path = Path(model)
    if path.is_dir() and (path / "config.json").is_file() or path.suffix == ".json" and path.is_file():
        return load_hf_config(path)
    if path.suffix == ".json":  # a file name, not an architecture name: say it is missing
        raise RLBenchError(f"model config {model}: no such file; pass an existing config.json, a model folder "
                           "or a built-in name")
    if path.is_dir():
        raise RLBenchError(f"model folder {model} has no config.json; pass the folder of a Hugging Face model")
    cached = _hub_cached_config(model)
    if cached:
        try:
            return dataclasses.replace(load_hf_config(cached), name=model, source=str(cached))
        except (RLBenchError, ValueError):
            pass  # a config the model cannot read (not a decoder-only LM): the table may still know the name
    return get_arch(model)


def workload_arch(model: ModelSpec) -> ModelArch | None:
    """A workload model's architecture from its own config, offline, or None where none is here.

    In order: the tiny model's spec (the config `tiny_model` builds), a local folder's or file's
    config.json, the Hugging Face cache's copy of the hub model's config.json, then rlbench's built-in
    table (values from each model's published config.json)."""
    if model.tiny is not None:
        t = model.tiny
        return ModelArch(name="tiny", layers=t.num_layers, hidden=t.hidden_size, heads=t.num_heads,
                         kv_heads=t.num_kv_heads, ffn=t.intermediate_size, vocab=t.vocab_size,
                         tied_embeddings=True, **_tiny_moe_fields(model), source="workload model.tiny")
    try:
        return arch_for(model.name)
    except (RLBenchError, ValueError):
        return None


def _tiny_moe_fields(model: ModelSpec) -> dict[str, Any]:
    """The tiny model's attention bias and MoE fields, as `tiny_model` builds it: dense and with a shared
    expert it is Qwen2(-MoE), q/k/v biases on, the shared expert behind a sigmoid gate; routed experts
    only, it is Qwen3-MoE, no biases (its per-head q/k RMSNorms, 2 x head_dim a layer, are not counted)."""
    tiny = model.tiny
    assert tiny is not None, "a tiny model's fields"
    if not tiny.is_moe:
        return {"qkv_bias": True}
    return {"qkv_bias": bool(tiny.shared_expert_intermediate_size), "moe_experts": tiny.num_experts,
            "moe_top_k": tiny.experts_per_token, "moe_ffn": tiny.expert_intermediate_size,
            "moe_shared_ffn": tiny.shared_expert_intermediate_size,
            "moe_shared_gate": bool(tiny.shared_expert_intermediate_size)}


def _hub_cached_config(repo: str) -> Path | None:
    """The Hugging Face cache's config.json of a hub model, never the network."""
    if Path(repo).exists() or repo.count("/") != 1:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo, "config.json")
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def hardware_for(environment: dict[str, Any]) -> Hardware | None:
    """The cited row of the run's GPU, the measured CPU row on a CPU run, None for an unknown GPU."""
    if environment.get("gpus"):
        return find_hardware(environment["gpus"][0]["name"])
    from rlbench.predict.cpu_probe import cpu_row

    return cpu_row()  # peaks and per-op latency measured on this machine, cached


def predict_run(workload: Workload, parallel: Parallelism, model: str, environment: dict[str, Any], *,
                prompt_len: float | None, recompute_old_logprob: bool, shape_fields: dict[str, Any] | None = None,
                framework: str | None = None, padded_prompt_len: float | None = None) -> dict[str, Any]:
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
    return {"available": True, "hardware": hardware.name, "hardware_source": hardware.source,
            "inputs": {"prompt_len": shape.prompt_len, "padded_prompt_len": shape.padded_prompt_len,
                       "response_len": shape.response_len, "gpus": gpus,
                       **(shape_fields or {})},
            "floor": floor.to_dict() if floor else {"reason": why_not}, **result.to_dict()}


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
            out["stages"][column] = {"measured_s": measured, "predicted_s": predicted,
                                     "floor_s": sum(stages[n].get("floor_s", 0.0) for n in names if n in stages),
                                     "measured_over_predicted": measured / predicted,
                                     **_over_estimate(measured, [stages[n].get("estimate_s") for n in names
                                                                 if n in stages])}
    step = summary.get("step_time_s", {}).get("median")
    if step and prediction.get("step_time_s"):
        out["step"] = {"measured_s": step, "predicted_s": prediction["step_time_s"],
                       "measured_over_predicted": step / prediction["step_time_s"],
                       **_over_estimate(step, [prediction.get("step_time_estimate_s")])}
        work = sum((s["time_s"] or 0.0) * s["gpus"] for s in prediction["stages"])
        out["bubble"] = 1 - work / (prediction["gpus"] * step)
    return out


def _over_estimate(measured: float, estimates: list[float | None]) -> dict[str, float]:
    """measured / the estimate (bound plus overhead terms) where the prediction has one (newer records)."""
    if not estimates or any(e is None for e in estimates) or not sum(estimates):  # type: ignore[arg-type]
        return {}
    total = sum(estimates)  # type: ignore[arg-type]
    return {"estimate_s": total, "measured_over_estimate": measured / total}
