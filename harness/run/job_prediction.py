"""The model's prediction for a finished run's exact work, and the machine the run's figures are per."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlbench.adapters.base import Adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import find_hardware
from rlbench.harness.predict.run_prediction import predict_run
from rlbench.harness.run.derive import canonical_work
from rlbench.harness.spec.runspec import RunSpec


def job_machine(environment: dict[str, Any], cluster: dict[str, Any] | None, job_gpus: int) -> dict[str, Any]:
    """The machine the job's figures are per (GPUs, the hardware row of its prediction, its $/GPU-hour): this
    host's, or on a cluster whose nodes have GPUs the job's GPUs of the nodes' model (rlbench may run on a host
    without any). run.json's `environment` stays this host's."""
    models = [name for node in (cluster or {}).get("nodes", []) for name in (node.get("gpu_models") or {}).values()]
    if not models:
        return environment
    return {**environment, "gpus": [{"name": models[0]}] * job_gpus, "gpu_count": job_gpus}


def gpu_price(environment: dict[str, Any]) -> float | None:
    """The cited default $/GPU-hour of the run's GPU, if the hardware table has one."""
    row = find_hardware(environment["gpus"][0]["name"]) if environment["gpus"] else None
    return row.usd_per_gpu_hour if row is not None else None


def run_prediction(
    spec: RunSpec, adapter: Adapter, model: str, environment: dict[str, Any], steps: pd.DataFrame
) -> dict[str, Any]:
    """The model's prediction for this run's exact work: its measured mean prompt length (and the
    padded widths where the framework pads), the lengths it generated where responses end at the end of text,
    and the old-log-prob pass only where the framework ran one (TRL skips it when updates align with
    generation)."""
    prompt_len = float((steps["prompt_tokens"] / steps["num_responses"]).median())
    padded = (
        (steps["padded_prompt_tokens"] / steps["num_responses"]).median() if "padded_prompt_tokens" in steps else None
    )
    width = steps["trainer_padded_width"].median() if "trainer_padded_width" in steps else None
    generated = None if spec.workload.fixed_length else _generated(steps)
    recompute = bool(steps["time_old_log_prob_s"].notna().any()) if "time_old_log_prob_s" in steps else True
    try:
        prediction = predict_run(
            spec.workload,
            spec.parallel,
            model,
            environment,
            prompt_len=prompt_len,
            recompute_old_logprob=recompute,
            shape_fields=adapter.launch_shape(spec, lane=adapter.lane(spec) is not None),
            framework=spec.framework,
            padded_prompt_len=None if padded is None else float(padded),
            trainer_padded_width=None if width is None else float(width),
            generated=generated,
        )
        if prediction.get("available"):
            prediction["canonical"] = canonical_work(spec.workload, spec.parallel, model, environment, prompt_len)
        return prediction
    except (RLBenchError, ValueError) as exc:  # the benchmark record matters more than its prediction
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _generated(steps: pd.DataFrame) -> tuple[float, float | None] | None:
    """(mean, longest) response length over the run's steps (medians of each step's); the longest None where the
    framework does not log it (the cap then bounds the batch)."""
    mean = (steps["response_tokens"] / steps["num_responses"]).median()
    if not math.isfinite(mean) or mean <= 0:
        return None
    longest = steps["response_length_max"].median() if "response_length_max" in steps else math.nan
    return float(mean), float(longest) if math.isfinite(longest) and longest >= mean else None
