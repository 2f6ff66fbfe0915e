"""What `rlbench predict` computes: a job's per-stage prediction, or its layouts ranked.

A model (config.json, folder or built-in name), a workload, a hardware row (or this machine's measured
CPU) and a GPU count; `--framework` takes that framework's launch shape and refusals, and on the CPU
row its floor measured by `rlbench calibrate`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import LAYOUT_AXES, FrameworkFloor, ResponseLengths, get_hardware
from rlbench.harness.predict.floor_cache import load_floor
from rlbench.harness.predict.job_shape import launch_shape, with_derived_dp
from rlbench.harness.predict.layouts import predict_layout, refuse_for_framework, sweep_layout_table
from rlbench.harness.predict.response_lengths import lengths_from_record, parse_lengths, refused, with_lengths
from rlbench.harness.predict.run_prediction import hardware_for
from rlbench.harness.spec.model_arch import arch_for
from rlbench.harness.spec.parallel import knob_label, parse_grid
from rlbench.workloads.catalog import load_workload
from rlbench.workloads.length_priors import length_prior
from rlbench.workloads.spec import Workload
from rlbench.workloads.tail import declared_lengths, geometric_quantile


def plan_job(
    model_config: str,
    workload: str,
    hardware: str,
    gpus: int,
    parallel: tuple[str, ...],
    sweeps: tuple[str, ...],
    gpu_hour_usd: float | None,
    framework: str | None,
    lengths: str | None = None,
    lengths_from: str | None = None,
) -> tuple[dict[str, Any], bool]:
    """(the prediction, False) for one layout, or (the ranked layouts table, True) when `sweeps` asks for them."""
    arch = arch_for(model_config)
    on_cpu = hardware.lower() == "cpu"  # a framework runs its CPU lane there: its lane's launch shape
    # on the CPU a lane framework computes in Ray actors at their own threads: its row is measured at them
    row = hardware_for({}, framework) if on_cpu else get_hardware(hardware)
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
    priced, length_note = response_lengths(loaded, lengths, lengths_from, model=model_config)
    grid, every = parse_grid(sweeps, flag="--sweep", knobs=LAYOUT_AXES, word="all")
    if clash := sorted({pair.partition("=")[0].strip() for pair in parallel} & set(grid)):
        raise RLBenchError(f"knob {clash[0]!r} is both fixed (--parallel) and swept (--sweep); keep one")
    if not grid and not every:
        if framework:  # what `rlbench run --framework` would refuse, refused here too
            refuse_for_framework(framework, loaded, parallel)
        launched = launch_shape(loaded, framework, with_derived_dp(parallel, gpus), on_cpu)
        shape = with_lengths(launched, *priced)
        result = predict_layout(arch, shape, parallel, gpus, row, gpu_hour_usd, floor)
        result["notes"] = [note, *length_note, *result["notes"]]
        return result, False

    def ranking(lengths: tuple[ResponseLengths | None, float | None]) -> dict[str, Any]:
        return sweep_layout_table(
            arch, loaded, framework, parallel, grid, every, gpus, row, gpu_hour_usd, floor, lane=on_cpu, lengths=lengths
        )

    table = ranking(priced)
    if priced[0] is not None and table["ranked"]:  # how much the winner owes to the tail it was given
        wider = ranking((priced[0].with_tail(2.0), priced[1]))
        length_note.append(_sensitivity(table["ranked"], wider["ranked"]))
        length_note.append(_crossover(ranking, priced[0]))
    table["notes"] = [note, *length_note, *table["notes"]]
    return table, True


# The plausible range of mean lengths a plan is judged over: the given mean times these, within (0, cap].
LENGTH_RANGE = (0.25, 0.5, 1.0, 2.0, 4.0)


def _crossover(ranking: Any, lengths: ResponseLengths) -> str:
    """One line: the fastest layout at each mean length across LENGTH_RANGE (the tail scaled with the mean), and
    where it changes, between which two means: the crossover a plan without measured lengths hinges on."""
    winners: list[tuple[float, dict[str, Any] | None]] = []
    for factor in LENGTH_RANGE:
        mean = min(lengths.mean * factor, float(lengths.cap))
        if winners and mean == winners[-1][0]:
            continue
        try:
            scaled = ResponseLengths(
                mean=mean, tail=lengths.tail * mean / lengths.mean, tail_quantile=lengths.tail_quantile, cap=lengths.cap
            )
        except ValueError:
            continue
        ranked = ranking((scaled, mean))["ranked"]
        winners.append((mean, ranked[0]["layout"] if ranked else None))
    span = f"mean lengths {winners[0][0]:.0f}-{winners[-1][0]:.0f} tokens"
    changes = [(a, b) for a, b in zip(winners, winners[1:]) if a[1] != b[1]]
    if not changes:
        return f"across {span} the same layout ranks first: no length crossover in that range"
    return (
        "; ".join(
            f"length crossover between mean {a[0]:.0f} and {b[0]:.0f} tokens: {_label(a[1])} ranks first below it, "
            f"{_label(b[1])} above"
            for a, b in changes
        )
        + f" (scanned {span})"
    )


def _label(layout: dict[str, Any] | None) -> str:
    return "no layout" if layout is None else knob_label(layout)


def _sensitivity(ranked: list[dict[str, Any]], wider: list[dict[str, Any]]) -> str:
    """One line: whether the fastest layout stays the fastest with the tail's excess over the mean doubled."""
    first = ranked[0]["layout"]
    if not wider:
        return "with the tail doubled no layout fits"
    if wider[0]["layout"] == first:
        return (
            f"with the tail doubled the same layout ranks first (estimate {ranked[0]['step_time_estimate_s']:.3g} "
            f"s -> {wider[0]['step_time_estimate_s']:.3g} s): the ranking's winner does not hinge on the tail"
        )
    moved = next((row["rank"] for row in wider if row["layout"] == first), None)
    where = f"rank {moved}" if moved else "not ranked"
    return (
        f"with the tail doubled another layout ranks first ({knob_label(wider[0]['layout'])}) and this one is "
        f"{where}: the winner depends on the tail, so measure it (--lengths-from RUN)"
    )


def response_lengths(
    workload: Workload, text: str | None, run: str | None, *, model: str | None = None
) -> tuple[tuple[ResponseLengths | None, float | None], list[str]]:
    """((distribution, mean) to price, the note that says so) from --lengths (`prior`: the declared prior of the
    workload's dataset with `model`, by default the workload's) or --lengths-from; without either, what
    `unstated_lengths` prices (and says)."""
    from rlbench.harness.record.read import read_record

    if text and run:
        raise RLBenchError("--lengths and --lengths-from both give the response lengths; keep one")
    cap = workload.max_response_length
    if text and text.strip() == "prior":
        model = model or workload.model.name
        lengths = declared_prior(workload, model)
        where = f"the declared prior of {workload.data.dataset} with {model}"
        return (lengths, lengths.mean), [
            _length_note(lengths, lengths.mean, where),
            f"prior's source: {lengths.source}",
        ]
    if text:
        lengths = parse_lengths(text, cap)
        return (lengths, lengths.mean), [_length_note(lengths, lengths.mean, "--lengths")]
    if run:
        record = read_record(run)
        if record["steps"] is None:
            raise RLBenchError(f"--lengths-from {run}: the run logged no step; pick a run that finished a step")
        # fitted under the run's own cap, which clipped what it measured; priced under this workload's
        measured_cap = int(record["workload"].get("max_response_length") or cap)
        lengths, mean = lengths_from_record(record["steps"], record["workload"]["warmup_steps"], measured_cap, run)
        notes = []
        if lengths is not None and measured_cap != cap:
            try:
                lengths = dataclasses.replace(lengths, cap=cap)
            except ValueError as exc:  # its mean beyond this workload's cap
                raise refused(f"--lengths-from {run}", exc) from None
            notes.append(f"the run's cap was {measured_cap} tokens, this workload's is {cap}: its tail is the run's")
        return (lengths, mean), [_length_note(lengths, mean, f"--lengths-from {run}"), *notes]
    return unstated_lengths(workload, model or workload.model.name)


def unstated_lengths(workload: Workload, model: str) -> tuple[tuple[ResponseLengths | None, float | None], list[str]]:
    """Lengths to price when none are given: the cap where the workload generates to it (fixed_length: that is
    the work); else the distribution a tail workload declares, else the declared prior of its dataset with
    `model`, each named; else the cap, said to be the most work a step can be, never presented as known."""
    cap = workload.max_response_length
    if workload.fixed_length:
        return (None, None), []
    declared = declared_lengths(workload)
    if declared is not None:  # geometric: its unclipped mean and p99 place the log-normal the model prices
        p = declared["end_probability"]
        lengths = ResponseLengths(
            mean=1.0 / p,
            tail=geometric_quantile(p, 0.99),
            tail_quantile=0.99,
            cap=cap,
            source=f"workload {workload.name}: model.tiny.end_probability {p:g}",
        )
        return (lengths, lengths.mean), [_length_note(lengths, lengths.mean, "the workload's declared distribution")]
    if length_prior(workload.data.dataset, model) is not None:
        try:
            lengths = declared_prior(workload, model)
        except RLBenchError:  # a cap below the prior's mean: the cap, said so below
            lengths = None
        if lengths is not None:
            where = f"the declared prior of {workload.data.dataset} with {model} (no --lengths given)"
            return (lengths, lengths.mean), [
                _length_note(lengths, lengths.mean, where),
                f"prior's source: {lengths.source}",
            ]
    return (None, None), [
        f"no --lengths given and no declared prior for {workload.data.dataset} with {model}: every response is "
        f"priced at the cap, {cap} tokens, the most work a step can be (not a known length); give --lengths "
        "mean=T,p90=T or measure them with --lengths-from RUN"
    ]


def _length_note(lengths: ResponseLengths | None, mean: float, source: str) -> str:
    if lengths is None:
        return f"response lengths from {source}: every response {mean:.0f} tokens (no tail measured)"
    tail = f"p{round(lengths.tail_quantile * 100)} {lengths.tail:.0f}"
    return (
        f"response lengths from {source}: mean {lengths.mean:.0f}, {tail}, cap {lengths.cap} tokens "
        f"(log-normal, {lengths.clipped_fraction:.1%} clipped); a synchronous step decodes to the expected "
        "longest of its batch"
    )


def declared_prior(workload: Workload, model: str) -> ResponseLengths:
    """The length prior of the workload's dataset with this model (rlbench.workloads.length_priors), under the
    workload's cap: the model, not the workload, sets how long its answers run."""
    prior = length_prior(workload.data.dataset, model)
    if prior is None:
        raise RLBenchError(
            f"--lengths prior: no declared response-length prior for {workload.data.dataset} with "
            f"{model}; give --lengths mean=T,p90=T or measure one with --lengths-from RUN"
        )
    try:
        return ResponseLengths(
            mean=prior.mean,
            tail=prior.tail,
            tail_quantile=prior.tail_quantile,
            cap=workload.max_response_length,
            source=prior.source,
        )
    except ValueError as exc:  # a cap below the prior's mean
        raise refused("--lengths prior", exc) from None


def measured_floor(framework: str) -> FrameworkFloor:
    """The floor `rlbench calibrate` cached for this framework here; only this machine's CPU has one."""
    floor, why_not = load_floor(framework)
    if floor is None:
        raise RLBenchError(f"--framework {framework}: {why_not}")
    return floor
