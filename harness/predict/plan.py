"""What `rlbench predict` computes: a job's per-stage prediction, or its layouts ranked.

A model (config.json, folder or built-in name), a workload, a hardware row (or this machine's measured
CPU) and a GPU count; `--framework` takes that framework's launch shape and refusals, and on the CPU
row its floor measured by `rlbench calibrate`.
"""

from __future__ import annotations

from typing import Any

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import FrameworkFloor, get_hardware
from rlbench.harness.perfmodel.sweep import LAYOUT_AXES
from rlbench.harness.predict.floor_cache import load_floor
from rlbench.harness.predict.job_shape import launch_shape
from rlbench.harness.predict.layouts import predict_layout, refuse_for_framework, sweep_layout_table
from rlbench.harness.predict.run_prediction import hardware_for
from rlbench.harness.spec.model_arch import arch_for
from rlbench.harness.spec.parallel import parse_grid
from rlbench.workloads.catalog import load_workload


def plan_job(
    model_config: str,
    workload: str,
    hardware: str,
    gpus: int,
    parallel: tuple[str, ...],
    sweeps: tuple[str, ...],
    gpu_hour_usd: float | None,
    framework: str | None,
) -> tuple[dict[str, Any], bool]:
    """(the prediction, False) for one layout, or (the ranked layouts table, True) when `sweeps` asks for them."""
    arch = arch_for(model_config)
    on_cpu = hardware.lower() == "cpu"  # a framework runs its CPU lane there: its lane's launch shape
    row = hardware_for({}) if on_cpu else get_hardware(hardware)
    loaded = load_workload(workload)
    floor, note = None, ""
    if framework:  # the framework's own launch of this workload (any row); its measured floor on the CPU row only
        get_adapter(framework)  # an unknown name: one error line with the nearest one
        if on_cpu:
            floor = measured_floor(framework)
        else:
            note = (
                f"--framework {framework}: its launch shape is used; no framework floor on {row.name} (the floor "
                "is measured on this machine's CPU by `rlbench calibrate` and applies to --hardware cpu only)"
            )
    else:
        note = (
            f"no --framework: neutral launch shape, token-packed micro-batches of "
            f"{launch_shape(loaded, None, ()).micro_batch_tokens} tokens per GPU and a CUDA-graph rollout "
            "engine"
        )
    grid, every = parse_grid(sweeps, flag="--sweep", knobs=LAYOUT_AXES, word="all")
    if clash := sorted({pair.partition("=")[0].strip() for pair in parallel} & set(grid)):
        raise RLBenchError(f"knob {clash[0]!r} is both fixed (--parallel) and swept (--sweep); keep one")
    if not grid and not every:
        if framework:  # what `rlbench run --framework` would refuse, refused here too
            refuse_for_framework(framework, loaded, parallel)
        result = predict_layout(
            arch, launch_shape(loaded, framework, parallel, on_cpu), parallel, gpus, row, gpu_hour_usd, floor
        )
        result["notes"] = [note, *result["notes"]]
        return result, False
    table = sweep_layout_table(
        arch, loaded, framework, parallel, grid, every, gpus, row, gpu_hour_usd, floor, lane=on_cpu
    )
    table["notes"] = [note, *table["notes"]]
    return table, True


def measured_floor(framework: str) -> FrameworkFloor:
    """The floor `rlbench calibrate` cached for this framework here; only this machine's CPU has one."""
    floor, why_not = load_floor(framework)
    if floor is None:
        raise RLBenchError(f"--framework {framework}: {why_not}")
    return floor
