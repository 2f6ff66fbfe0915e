"""Metrics rlbench derives itself from each step's measured counts and times.

Computed here, identically for every framework, rather than taken from a
framework's own throughput figure (frameworks define theirs differently): the
step time they divide by is `wall_step_time_s` (step_stamps.py), and MFU's
numerator is the workload's canonical FLOPs, the same for every framework.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rlbench.harness.predict.run_prediction import predict_run
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload
from rlbench.workloads.tail import declared_lengths

OWN_TIMER_NOTE = (
    "no step-end stamps: throughput and MFU divide by the framework's own step timer (step_time_s), "
    "not the common wall_step_time_s, so they do not compare with other frameworks' records"
)


def has_wall_time(steps: pd.DataFrame) -> bool:
    return "wall_step_time_s" in steps and bool(steps["wall_step_time_s"].notna().any())


def step_seconds(steps: pd.DataFrame) -> pd.Series:
    """The step time rates divide by: wall_step_time_s, or the framework's timer where no step has a stamp."""
    return steps["wall_step_time_s"] if has_wall_time(steps) else steps["step_time_s"]


def derive_step_metrics(steps: pd.DataFrame, gpu_count: int) -> tuple[pd.DataFrame, str | None]:
    """Add total_tokens, tokens/s (HybridFlow: prompt+response tokens / step time) and per-GPU rates;
    the note says when the framework's own timer had to stand in for the common step time."""
    if steps.empty:
        return steps, None
    steps = steps.copy()
    seconds = step_seconds(steps)
    steps["total_tokens"] = steps["prompt_tokens"] + steps["response_tokens"]
    steps["tokens_per_s"] = steps["total_tokens"] / seconds
    steps["tokens_per_s_per_gpu"] = steps["tokens_per_s"] / gpu_count if gpu_count else np.nan
    if "time_gen_s" in steps:
        steps["response_tokens_per_s"] = steps["response_tokens"] / steps["time_gen_s"]
    return steps, None if has_wall_time(steps) else OWN_TIMER_NOTE


def needs_old_logprob(workload: Workload) -> bool:
    """Whether the algorithm needs a separate old-policy log-prob pass: only when a rollout batch gets more
    than one optimiser update (the policy moves before the last mini-batch); with one update the ratio's
    denominator is the current policy's own log-prob, which the update's forward already computes."""
    return workload.updates_per_step > 1


def canonical_work(
    workload: Workload, parallel: Parallelism, model: str, environment: dict[str, Any], prompt_len: float
) -> dict[str, Any]:
    """MFU's numerator, the same for every framework: the model's FLOPs of the algorithm's passes (generation,
    the old-log-prob pass only where needs_old_logprob, the reference pass where KL is on, the critic's for
    PPO, the updates) on the run's real prompt length (no padding) and the workload's responses, under the
    neutral launch shape (no framework's micro-batching); recomputation excluded."""
    neutral = predict_run(
        workload,
        parallel,
        model,
        environment,
        prompt_len=prompt_len,
        recompute_old_logprob=needs_old_logprob(workload),
    )
    if not neutral.get("available"):
        return {"available": False, "reason": neutral.get("reason")}
    return {
        "available": True,
        "model_flops": neutral["model_flops"],
        "tokens_per_step": neutral["tokens_per_step"],
        "prompt_len": neutral["inputs"]["prompt_len"],
        "old_logprob_pass": needs_old_logprob(workload),
        "definition": "the algorithm's passes on the real tokens, neutral launch shape, no padding; the same "
        "for every framework on this workload, so MFU ratios are inverse step-time ratios on equal work",
    }


def model_flops_utilisation(steps: pd.DataFrame, prediction: dict[str, Any]) -> pd.Series:
    """rlbench's MFU of each step, one definition for every framework (PaLM, appendix B):

        mfu = canonical model FLOPs of the step / (devices x dense peak per device x wall step time)

    The canonical FLOPs (canonical_work) are the work-depth model's count of the workload's algorithm at
    this run's real prompt length, scaled linearly by the step's real token count over the count they were
    made at (the quadratic attention share makes the scaling first-order only). The peak is a GPU's datasheet
    dense bf16 peak (the prediction's hardware row), or on a CPU the fastest matmul rate its probe measured
    (mfu_peak_flops_per_device). NaN where
    there is no prediction. A framework's own MFU figure, where it logs one, is kept as `framework_mfu`.
    """
    canonical = prediction.get("canonical") or {}
    needed = ("gpus", "peak_flops_per_device")
    peak = prediction.get("mfu_peak_flops_per_device") or prediction.get("peak_flops_per_device")
    if (
        steps.empty
        or not prediction.get("available")
        or not canonical.get("available")
        or any(not prediction.get(k) for k in needed)
        or not canonical.get("tokens_per_step")
        or not math.isfinite(canonical.get("model_flops") or math.nan)
    ):
        return pd.Series(np.nan, index=steps.index, dtype=float)
    flops = canonical["model_flops"] * steps["total_tokens"] / canonical["tokens_per_step"]
    return flops / (prediction["gpus"] * peak * step_seconds(steps))


def weight_sync_rate(steps: pd.DataFrame, prediction: dict[str, Any]) -> pd.Series:
    """GB/s per rollout GPU of each step's weight sync: the engine's weight shard (the model's parameters at
    the engine's dtype over rollout_tp, `memory_breakdown_gb.rollout_weights` of the run's prediction) over
    the measured sync time. Set beside `weight_sync_bound_gb_per_s`, the link it crosses: NaN where the step
    has no sync time or the run no prediction."""
    weights_gb = ((prediction or {}).get("memory_breakdown_gb") or {}).get("rollout_weights")
    if steps.empty or "time_weight_sync_s" not in steps or not weights_gb:
        return pd.Series(np.nan, index=steps.index, dtype=float)
    seconds = steps["time_weight_sync_s"].where(steps["time_weight_sync_s"] > 0)
    return weights_gb / seconds


def time_to_first_step(launched_unix_s: float | None, steps: pd.DataFrame) -> float | None:
    """Launch to the end of the first step (its writer's stamp, else rlbench's arrival stamp); None without one."""
    if launched_unix_s is None or steps.empty:
        return None
    first = steps.sort_values("step").iloc[0]
    for column in ("step_end_unix_s", "step_seen_unix_s"):
        end = first.get(column)
        if end is not None and math.isfinite(end) and end >= launched_unix_s:
            return float(end - launched_unix_s)
    return None


def response_lengths(steps: pd.DataFrame, workload: Workload) -> dict[str, Any] | None:
    """run.json's `response_lengths`: each step's generated lengths as the framework's own rollout data gives
    them (mean, longest, p50/p90/p99, share stopped at the cap; None where it does not log one), beside the
    workload's cap and
    the distribution it declares (workloads/tail.py)."""
    if steps.empty:
        return None

    def value(row: Any, column: str) -> float | None:
        number = getattr(row, column, math.nan)
        return float(number) if number is not None and math.isfinite(number) else None

    rows = [
        {
            "step": int(row.step),
            "mean": value(row, "response_length_mean"),
            "max": value(row, "response_length_max"),
            **{q: value(row, f"response_length_{q}") for q in ("p50", "p90", "p99")},
            "clipped_share": value(row, "response_clipped_fraction"),
        }
        for row in steps.sort_values("step").itertuples()
    ]
    return {
        "cap": workload.max_response_length,
        "fixed_length": workload.fixed_length,
        "declared": declared_lengths(workload),  # the distribution a tail workload declares, or None
        "steps": rows,
        "n": len(rows),
    }
