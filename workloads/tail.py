"""The response-length distribution a tail workload declares: its tiny model ends each generated token with
probability p (`model.tiny.end_probability`, tiny_model.py), so a response's length L (its end-of-text token
counted) is geometric, P(L = k) = (1 - p)^(k-1) p, and max_response_length clips it. The same distribution for
every framework's sampler; each run realises its own sample of it (run.json `response_lengths` beside this).

    python -c "from rlbench.workloads.catalog import load_workload; from rlbench.workloads.tail import \\
        declared_lengths; print(declared_lengths(load_workload('gsm8k-grpo-tiny-tail')))"
"""

from __future__ import annotations

import math
from typing import Any

from rlbench.workloads.spec import Workload

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def geometric_quantile(end_probability: float, quantile: float) -> int:
    """The least length k (tokens, the end of text counted) with P(L <= k) >= quantile, before any cap clips it."""
    return math.ceil(math.log(1.0 - quantile) / math.log(1.0 - end_probability))


def declared_lengths(workload: Workload) -> dict[str, Any] | None:
    """{end_probability, cap, mean, p50, p90, p99, clipped_share} of the clipped geometric lengths (tokens), or
    None for a workload that does not declare an end probability."""
    tiny = workload.model.tiny
    if tiny is None or not tiny.end_probability:
        return None
    p, cap = tiny.end_probability, workload.max_response_length
    survive = 1.0 - p  # a token that is not the end of text
    return {
        "end_probability": p,
        "cap": cap,
        "mean": (1.0 - survive**cap) / p,  # E[min(L, cap)]
        **{name: min(cap, geometric_quantile(p, q)) for name, q in QUANTILES.items()},
        "clipped_share": survive**cap,  # no end of text in `cap` tokens
    }
