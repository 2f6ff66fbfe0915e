"""Metrics rlbench derives itself from each step's measured counts and times.

Computed here, identically for every framework, rather than taken from a
framework's own throughput figure (frameworks define theirs differently).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def derive_step_metrics(steps: pd.DataFrame, gpu_count: int) -> pd.DataFrame:
    """Add total_tokens, tokens/s (HybridFlow: prompt+response tokens / step time) and per-GPU rates."""
    if steps.empty:
        return steps
    steps = steps.copy()
    steps["total_tokens"] = steps["prompt_tokens"] + steps["response_tokens"]
    steps["tokens_per_s"] = steps["total_tokens"] / steps["step_time_s"]
    steps["tokens_per_s_per_gpu"] = steps["tokens_per_s"] / gpu_count if gpu_count else np.nan
    if "time_gen_s" in steps:
        steps["response_tokens_per_s"] = steps["response_tokens"] / steps["time_gen_s"]
    return steps


def model_flops_utilisation(steps: pd.DataFrame, prediction: dict[str, Any]) -> pd.Series:
    """rlbench's MFU of each step, one definition for every framework (PaLM, appendix B):

        mfu = model FLOPs of the step / (devices x dense peak per device x step time)

    The model FLOPs are the work-depth model's count for this run's exact shape (prediction.json:
    generation, log-prob passes and updates, recomputation excluded), scaled linearly by the step's
    real token count over the prediction's (the prediction is made at the run's mean prompt length;
    the quadratic attention share makes the scaling first-order only). The peak is the prediction's
    hardware row: a GPU's datasheet dense bf16 peak, or this CPU's measured peak. NaN where there is
    no prediction. A framework's own MFU figure, where it logs one, is kept as `framework_mfu`.
    """
    needed = ("model_flops", "tokens_per_step", "gpus", "peak_flops_per_device")
    if steps.empty or not prediction.get("available") or any(not prediction.get(k) for k in needed):
        return pd.Series(np.nan, index=steps.index, dtype=float)
    flops = prediction["model_flops"] * steps["total_tokens"] / prediction["tokens_per_step"]
    return flops / (prediction["gpus"] * prediction["peak_flops_per_device"] * steps["step_time_s"])
