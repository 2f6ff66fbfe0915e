"""Metrics rlbench derives itself from each step's measured counts and times.

Computed here, identically for every framework, rather than taken from a
framework's own throughput figure (frameworks define theirs differently).
"""

from __future__ import annotations

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
