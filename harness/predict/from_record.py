"""`rlbench predict --from-record RUN`: a measured run scaled to another size or layout.

The run gives what it measured and the model gives how that scales:
* measured: the response lengths (response_lengths.lengths_from_record), each stage's time as a ratio to
  the model's estimate of the same stage at the run's own layout (its efficiency against the model: the
  framework's overheads, the kernels' real rates), and the step's time outside every stage (the
  framework's own per-step work), carried over unchanged;
* modelled: how each stage's estimate moves from the run's layout to the target's (the work-depth model).
A stage the run did not time is the model's estimate alone. On other hardware than the run's the ratios
are not carried (an efficiency measured on one device says nothing of another): only the lengths and the
prompt length are, and the launch shape is the framework's on that device (not a CPU lane's).

At the run's own layout the prediction is the measured step by construction for a synchronous run; the
consistency line compares the two anyway, so a stage the mapping misses shows up there.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import (
    Hardware,
    ParallelShape,
    WorkloadShape,
    combine_stages,
    find_hardware,
    get_hardware,
    predict,
)
from rlbench.harness.predict.job_shape import framework_fields, parallel_shape, workload_shape
from rlbench.harness.predict.response_lengths import lengths_from_record, with_lengths
from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.harness.record.schema import PREDICTION_FILE
from rlbench.harness.spec.parallel import Parallelism, knob_pairs, parse_parallel

# Shape fields a run's prediction.json records beyond the workload (its framework's launch shape).
_LAUNCH_FIELDS = (
    "micro_batch_size",
    "micro_batch_tokens",
    "shared_prefill",
    "prefix_block_tokens",
    "dtype_bytes",
    "kv_cache",
    "engine_mode",
    "engine_max_seqs",
    "engine_memory_fraction",
    "padded_prompt_len",
    "trainer_padded_prompt_len",
    "critic_padded_prompt_len",
)


def plan_from_record(run: str, gpus: int | None, pairs: tuple[str, ...], hardware: str | None) -> dict[str, Any]:
    """The run scaled to `gpus` and the `--parallel` pairs (over the run's own knobs), on `hardware` (the run's
    own when None): per stage what was measured, its ratio to the model and the prediction, and the basis."""

    from rlbench.harness.predict.cpu_probe import cpu_row
    from rlbench.harness.record.read import read_prediction, read_record
    from rlbench.harness.spec.model_arch import arch_for, workload_arch
    from rlbench.workloads.catalog import workload_from_mapping

    record = read_record(run)
    steps = record["steps"]
    if record.get("status") != "succeeded" or steps is None:
        raise RLBenchError(f"--from-record {run}: the run did not succeed ({record.get('status')}); pick one that did")
    own = read_prediction(run) or {}  # a damaged one: the readers' one line
    if not own.get("available"):
        raise RLBenchError(f"--from-record {run}: it has no prediction of its own to scale from ({PREDICTION_FILE})")
    workload = workload_from_mapping(record["workload"])
    arch = workload_arch(workload.model) or arch_for(record.get("model_path") or workload.model.name)
    environment = record.get("environment") or {}
    gpu_names = [g.get("name") for g in environment.get("gpus") or []]
    measured_on: Hardware | None = find_hardware(gpu_names[0]) if gpu_names else cpu_row()
    if measured_on is None:
        raise RLBenchError(f"--from-record {run}: its GPU '{gpu_names[0]}' is not in the cited hardware table")
    on_cpu = hardware is not None and hardware.lower() == "cpu"
    if hardware is None:
        target = measured_on
    else:
        target = cpu_row() if on_cpu else get_hardware(hardware)
    same_hardware = target.name == measured_on.name

    # the run's own knobs, each knob given replacing the run's (a knob given twice is still refused)
    knobs = {**record["parallel"]}
    named = {pair.partition("=")[0].strip() for pair in pairs}
    source_parallel = parse_parallel(knob_pairs(knobs))
    target_parallel = parse_parallel(knob_pairs({k: v for k, v in knobs.items() if k not in named}) + list(pairs))
    source_gpus = source_parallel.world_size if gpu_names else 1
    if not gpu_names and (gpus or 1) > 1 and same_hardware:
        raise RLBenchError(
            f"--from-record {run}: a CPU run is one device; scale it to GPUs with --hardware (e.g. H100-SXM)"
        )
    target_gpus = gpus or source_gpus
    shape = _shape(workload, own, steps)
    try:
        lengths, mean = lengths_from_record(steps, workload.warmup_steps, workload.max_response_length, run)
    except RLBenchError:  # lengths not logged: the workload's own (the cap where fixed_length)
        lengths, mean = None, None
    if lengths is None and workload.fixed_length:
        mean = None  # every response at the cap, as the run generated them
    shape = with_lengths(shape, lengths, mean)
    source_layout, target_layout = _layout(source_parallel, source_gpus), _layout(target_parallel, target_gpus)
    target_shape = shape
    if not same_hardware:
        launch_parallel = dataclasses.replace(target_parallel, dp=target_layout.data_parallel)
        launched = _launched_on(shape, record["framework"]["name"], workload, launch_parallel, on_cpu)
        target_shape = with_lengths(launched, lengths, mean)
    try:
        at_source = predict(arch, shape, source_layout, measured_on)
        at_target = predict(arch, target_shape, target_layout, target)
    except ValueError as exc:
        raise RLBenchError(f"--from-record {run}: {exc}") from None
    summary = record["summary"]
    measured = {c: _median_of(summary, f"time_{c}_s") for c in STAGE_MAP}
    ratios: dict[str, float] = {}  # timed and priced: the run's efficiency against the model, per stage column
    as_measured: dict[str, float] = {}  # timed, but priced at zero by the model (a rule reward): carried as is
    accounted = 0.0  # of the run's step: its timed stages, and the model's figure for the untimed ones
    for column, names in STAGE_MAP.items():
        source_s = _total(at_source.estimate_stages, names)
        if measured[column] is not None:
            accounted += measured[column]
            if source_s:
                ratios[column] = measured[column] / source_s
            else:
                as_measured[column] = measured[column]
        elif source_s:
            accounted += source_s
    step = summary.get("wall_step_time_s") or summary.get("step_time_s") or {}
    outside = max(0.0, step.get("median", 0.0) - accounted) if same_hardware else 0.0
    carried = (ratios, as_measured, outside) if same_hardware else ({}, {}, 0.0)
    scaled, predicted = _scaled(at_target, target_layout, *carried)
    rows = []
    for column, names in STAGE_MAP.items():
        target_s = _total(at_target.estimate_stages, names)
        if measured[column] is None and not target_s:
            continue
        basis = "model"
        if same_hardware and column in ratios:
            basis = "measured ratio x model"
        elif same_hardware and column in as_measured:
            basis = "measured"
        rows.append(
            {
                "stage": column,
                "measured_s": measured[column],
                "model_at_run_s": _total(at_source.estimate_stages, names),
                "measured_over_model": ratios.get(column),
                "model_at_target_s": target_s,
                "predicted_s": as_measured[column] if basis == "measured" else _total(scaled, names),
                "basis": basis,
            }
        )
    at_run = None
    if same_hardware and step.get("median"):
        _, again = _scaled(at_source, source_layout, *carried)
        at_run = {
            "predicted_s": again,
            "measured_median_s": step["median"],
            "measured_std_s": step.get("std"),
            "n": step.get("n"),
            "within_spread": None
            if again is None or step.get("std") is None
            else abs(again - step["median"]) <= max(step["std"], 1e-9),
        }
    measured_terms = ["response lengths"] if lengths is not None or mean is not None else []
    if same_hardware:
        measured_terms += ["each timed stage's ratio to the model", "the step's time outside the stages"]
    return {
        "from_record": str(run),
        "framework": record["framework"]["name"],
        "hardware": target.name,
        "measured_on": measured_on.name,
        "gpus": target_gpus,
        "parallel": target_parallel.non_default(),
        "stages": rows,
        "outside_stages_s": outside,
        "step_time_s": predicted,
        "step_time_model_only_s": at_target.step_time_estimate_s,
        "basis": {
            "measured": measured_terms,
            "modelled": ["how each stage moves from the run's layout to this one"]
            + (
                []
                if same_hardware
                else [
                    f"every stage's rate on {target.name} (the run was on {measured_on.name})",
                    f"the framework's launch on {target.name}",
                ]
            ),
        },
        "consistency": at_run,
        "lengths": None
        if lengths is None
        else {"mean": lengths.mean, "p90": lengths.tail, "cap": lengths.cap, "source": lengths.source},
    }


def _shape(workload: Any, own: dict[str, Any], steps: Any):
    """The run's shape as its prediction had it: the measured prompt length, its framework's launch fields."""
    inputs = own.get("inputs") or {}
    recompute = bool(steps["time_old_log_prob_s"].notna().any()) if "time_old_log_prob_s" in steps else True
    shape = workload_shape(workload, prompt_len=inputs.get("prompt_len"), recompute_old_logprob=recompute)
    fields = {k: inputs[k] for k in _LAUNCH_FIELDS if inputs.get(k) is not None}
    return dataclasses.replace(shape, **fields)


def _launched_on(
    shape: WorkloadShape, framework: str, workload: Any, parallel: Parallelism, on_cpu: bool
) -> WorkloadShape:
    """The run's measured prompt length with its framework's launch on another device (its CPU lane's on the CPU
    row), as `rlbench predict --framework` prices it there: a lane's padding, KV block and eager engine are the
    lane's, not what the framework launches on a GPU."""
    base = workload_shape(workload, prompt_len=shape.prompt_len, recompute_old_logprob=shape.recompute_old_logprob)
    return dataclasses.replace(base, **framework_fields(framework, workload, parallel, lane=on_cpu))


def _layout(parallel: Parallelism, gpus: int) -> ParallelShape:
    try:
        return parallel_shape(parallel, gpus)
    except ValueError as exc:
        raise RLBenchError(str(exc)) from None


def _total(stages: tuple[Any, ...] | list[Any], names: tuple[str, ...]) -> float | None:
    times = [s.time_s for s in stages if s.name in names]
    return None if not times or any(t is None for t in times) else sum(times)


def _median_of(summary: dict[str, Any], column: str) -> float | None:
    value = (summary.get(column) or {}).get("median")
    return float(value) if value is not None and math.isfinite(value) else None


def _scaled(
    prediction: Any, layout: ParallelShape, ratios: dict[str, float], as_measured: dict[str, float], outside: float
) -> tuple[list[Any], float | None]:
    """(the estimate's stages with each timed column's ratio applied, the step over the layout's DAG plus the
    stages carried as measured and the time outside every stage)."""
    stages = []
    for stage in prediction.estimate_stages:
        column = next((c for c, names in STAGE_MAP.items() if stage.name in names), None)
        ratio = ratios.get(column) if column else None
        if ratio is not None and stage.time_s is not None:
            stage = dataclasses.replace(stage, time_s=stage.time_s * ratio)
        stages.append(stage)
    combined = combine_stages(stages, layout)
    return stages, None if combined is None else combined + sum(as_measured.values()) + outside


def from_record_table(result: dict[str, Any]) -> str:
    """The scaled prediction for humans: per stage, then the step, the basis and the consistency check."""

    def fmt(value: float | None, digits: int = 3) -> str:
        return "n/a" if value is None else f"{value:.{digits}g}"

    lines = [
        f"{'stage':<14} {'measured s':>10} {'model@run s':>11} {'ratio':>7} {'model@here s':>12} {'predicted s':>11}"
    ]
    for row in result["stages"]:
        lines.append(
            f"{row['stage']:<14} {fmt(row['measured_s']):>10} {fmt(row['model_at_run_s']):>11} "
            f"{fmt(row['measured_over_model']):>7} {fmt(row['model_at_target_s']):>12} {fmt(row['predicted_s']):>11}"
        )
    layout = " ".join(f"{k}={v}" for k, v in result["parallel"].items()) or "the run's knobs"
    outside = (
        f"; {fmt(result['outside_stages_s'])} s a step outside the stages, as measured"
        if result["hardware"] == result["measured_on"]
        else ""
    )
    lines += [
        "",
        f"step time    {fmt(result['step_time_s'])} s on {result['gpus']} x {result['hardware']}, {layout} "
        f"(model alone: {fmt(result['step_time_model_only_s'])} s{outside})",
        "measured:    " + (", ".join(result["basis"]["measured"]) or "nothing carried over"),
        "modelled:    " + ", ".join(result["basis"]["modelled"]),
    ]
    check = result.get("consistency")
    if check and check.get("predicted_s") is not None:
        verdict = "within" if check["within_spread"] else "outside"
        lines.append(
            f"check:       at the run's own layout {fmt(check['predicted_s'])} s against its measured median "
            f"{fmt(check['measured_median_s'])} s (std {fmt(check['measured_std_s'])}, n={check['n']}): "
            f"{verdict} its spread"
        )
    if result.get("lengths"):
        lengths = result["lengths"]
        lines.append(
            f"lengths:     mean {lengths['mean']:.0f}, p90 {lengths['p90']:.0f}, cap {lengths['cap']} (measured)"
        )
    return "\n".join(lines)
