"""verl's custom reward hook for rlbench: scores verl's responses with rlbench's shared reward.

verl imports this file by path (`reward.custom_reward_function.path`, name
`compute_score`) inside its reward workers, so verl is scored exactly as every
other framework: by `rlbench.workloads.rewards.score`. The row's `data_source`
is the rlbench dataset name (`gsm8k` or `math`) the verl adapter wrote into the
training parquet.

    compute_score("gsm8k", "... #### 18", "18")   # 1.0
"""

from __future__ import annotations

from typing import Any

from rlbench.workloads.rewards import score


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **_: Any
) -> float:
    """verl's reward-function signature (naive reward manager) -> rlbench's score in {0.0, 1.0}."""
    return score(data_source, solution_str, ground_truth)
