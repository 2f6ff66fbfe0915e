"""A run's prediction and the comparison with it: the work-depth model priced at the run's exact configuration,
and a finished run's summary as measured/predicted ratios per stage.

The job's shape comes from job_shape.py. CPU runs use the peaks measured on this machine (`cpu_probe`); a
GPU missing from the cited hardware table gives no prediction ("n/a"), never a guessed peak. Where
`rlbench calibrate` measured the framework's per-step floor on this machine, the prediction includes it
(floor_cache.py).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import (
    Hardware,
    Prediction,
    find_hardware,
    predict,
)
from rlbench.harness.predict.floor_cache import load_floor
from rlbench.harness.predict.job_shape import engine_fields, neutral_fields, parallel_shape, workload_shape
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


def hardware_for(environment: dict[str, Any], framework: str | None = None) -> Hardware | None:
    """The cited row of the run's GPU, the measured CPU row on a CPU run, None for an unknown GPU. On a CPU run
    of a framework whose workers compute with their own torch threads (a CPU lane's Ray actors:
    Adapter.cpu_worker_threads), the CPU row measured at that many threads."""
    if environment.get("gpus"):
        return find_hardware(environment["gpus"][0]["name"])
    from rlbench.harness.predict.cpu_probe import cpu_row

    threads = None
    if framework:
        from rlbench.adapters.registry import get_adapter

        threads = getattr(get_adapter(framework), "cpu_worker_threads", None)
    # peaks and per-op latency measured on this machine, cached (at the workers' threads, cached apart)
    return cpu_row(threads=threads) if threads else cpu_row()


def _cpu_devices(parallel: Parallelism, environment: dict[str, Any]) -> int | None:
    """The devices the CPU row stands for: one for a colocated run (its stages take turns on the worker threads
    the row was probed at); two for a run with a rollout pool of its own (a CPU lane's trainer and rollout
    engine are separate processes, each on its own worker thread: side by side where the machine has the cores);
    None where it has not."""
    if parallel.placement != "disaggregated":
        return 1
    return 2 if (environment.get("cpu_count") or 1) >= 2 else None


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
    trainer_padded_width: float | None = None,
    generated: tuple[float, float | None] | None = None,
) -> dict[str, Any]:
    """prediction.json of a run: the model's inputs and its per-stage prediction, or why there is none.

    generated: (mean, longest) response length the run measured (longest None where not logged: the cap), for a
    workload whose responses end at the end of text (not fixed_length): the model then prices the tokens
    generated, not the cap.
    shape_fields: what the framework's launch fixed beyond the workload (Adapter.model_shape).
    padded_prompt_len: the measured prompt width of a left-padded batch (TRL's padded_prompt_tokens
    per response), None or NaN where the framework does not pad.
    trainer_padded_width: the measured positions per sequence of the training passes alone, where the engine
    pages but the trainer pads (OpenRLHF without packing: trainer_padded_width); its prompt part replaces any
    declared trainer_padded_prompt_len.
    framework: on a CPU run, with a floor cached for it on this machine (`rlbench calibrate`), the
    prediction includes it; "floor" says which, or why there is none (never on a GPU row).
    Without shape_fields the neutral launch shape (neutral_fields) is used."""
    try:
        arch = arch_for(model)
    except RLBenchError as exc:
        return {"available": False, "reason": f"no architecture for model '{model}': {exc}"}
    hardware = hardware_for(environment, framework)
    if hardware is None:
        gpu = environment["gpus"][0]["name"]
        return {"available": False, "reason": f"GPU '{gpu}' is not in rlbench's cited hardware table"}
    if not environment.get("gpus") and parallel.world_size > 1:
        return {
            "available": False,
            "reason": f"the CPU row models this machine as one device; {parallel.world_size} ranks on CPU (a CPU "
            "lane across a Ray cluster) share its cores, which the model does not express",
        }
    gpus = parallel.world_size if environment.get("gpus") else _cpu_devices(parallel, environment)
    if gpus is None:
        return {
            "available": False,
            "reason": "a rollout pool of its own on a one-core CPU shares that core with the trainer, which the "
            "model's two devices do not express",
        }
    if environment.get("gpus"):  # a multi-node GPU run: its collectives cross nodes as its layout says
        from rlbench.harness.predict.nodes import on_nodes

        try:
            hardware = on_nodes(hardware, parallel, gpus)
        except RLBenchError as exc:
            return {"available": False, "reason": str(exc)}
    shape = workload_shape(workload, prompt_len=prompt_len, recompute_old_logprob=recompute_old_logprob)
    if generated is not None and not workload.fixed_length:
        mean, longest = generated
        longest = shape.response_len if longest is None else min(shape.response_len, max(1, round(longest)))
        shape = dataclasses.replace(shape, response_len=longest, mean_response_len=min(float(mean), longest))
    if shape_fields is None:  # no framework's launch: the documented neutral shape, never one sequence per micro-batch
        shape_fields = neutral_fields(shape, parallel)
    else:  # the launch's own fields with the engine's equal-work mode and limits, as framework_fields has them
        shape_fields = {**shape_fields, **engine_fields(workload, parallel, shape_fields)}
    shape = dataclasses.replace(shape, **shape_fields)
    if padded_prompt_len is not None and not math.isnan(padded_prompt_len):
        shape = dataclasses.replace(shape, padded_prompt_len=max(shape.prompt_len, round(padded_prompt_len)))
    if trainer_padded_width is not None and not math.isnan(trainer_padded_width):
        measured = max(shape.prompt_len, round(trainer_padded_width - shape.response_len))
        shape = dataclasses.replace(shape, trainer_padded_prompt_len=measured)
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
            "mean_response_len": shape.mean_response_len,
            "gpus": gpus,
            **(shape_fields or {}),
            "trainer_padded_prompt_len": shape.trainer_padded_prompt_len,  # a measured width wins over a declared
        },
        "floor": floor.to_dict() if floor else {"reason": why_not},
        **result.to_dict(),
        "mfu_peak_flops_per_device": _mfu_peak(environment, result.peak_flops),
        **_sync_bound(environment, hardware),
    }


def _sync_bound(environment: dict[str, Any], hardware: Hardware) -> dict[str, Any]:
    """The link a weight sync crosses, per rollout GPU and direction: a GPU row's intra-node link (NVLink, or
    PCIe where none); on a CPU the memory bandwidth this machine's probe measured (a sync there is a copy)."""
    if environment.get("gpus"):
        link, what = hardware.intra_node_bytes_per_s, f"{hardware.name} intra-node link, one direction"
    else:
        link, what = hardware.hbm_bytes_per_s, "this machine's measured memory bandwidth (a CPU sync is a copy)"
    return {
        "weight_sync_bound_gb_per_s": None if link is None else link / 1e9,
        "weight_sync_bound": what if link is not None else f"{hardware.name} states no intra-node link",
    }


def _mfu_peak(environment: dict[str, Any], row_peak: float | None) -> float | None:
    """MFU's denominator per device: a GPU's datasheet dense peak (the row's); on a CPU the fastest rate this
    machine's probe measured, which no real FLOP rate of a run can beat."""
    if environment.get("gpus"):
        return row_peak
    from rlbench.harness.predict.cpu_probe import best_flops_per_s

    return max(best_flops_per_s(), row_peak or 0.0)


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
