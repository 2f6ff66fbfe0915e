"""The one reward function every framework adapter uses, so all frameworks score alike.

`score(dataset, response, ground_truth)` returns 1.0 for a correct final answer and
0.0 otherwise (never raising on whatever text a model produced). The dataset's
registry row (`rlbench.workloads.dataset_registry`) says how the answer is found and
checked:

- gsm8k: the number after the last `####`, else the last number in the response,
  compared numerically with the reference (`1,000` == `1000`, `$18` == `18.0`);
  see `rlbench.workloads.answers.numeric`.
- math: the content of the last `\\boxed{...}` (or `\\boxed 5`, `\\fbox{...}`), checked
  for mathematical equivalence with the reference by math-verify; when math-verify
  cannot decide, a normalised string comparison; see `rlbench.workloads.answers.boxed`.

    score("gsm8k", "... so she makes #### $18.", "18")   # 1.0
    score("math", "... \\boxed{\\dfrac{1}{2}}", "0.5")     # 1.0
"""

from __future__ import annotations

from rlbench.workloads import dataset_registry
from rlbench.workloads.answers.boxed import last_boxed
from rlbench.workloads.answers.numeric import reference as gsm8k_ground_truth

# The two extractions callers use directly (tests, notebooks), under their long-standing names.
__all__ = ["gsm8k_ground_truth", "last_boxed", "reward_names", "score"]


def reward_names() -> tuple[str, ...]:
    """The dataset names `score` accepts, one reward per dataset."""
    return dataset_registry.names()


def score(dataset: str, response: str, ground_truth: str) -> float:
    """1.0 if `response`'s final answer matches `ground_truth` for `dataset`, else 0.0."""
    row = dataset_registry.get(dataset)
    if not isinstance(response, str) or not response.strip():
        return 0.0
    predicted = row.extract(response)
    if predicted is None:
        return 0.0
    return 1.0 if row.matches(predicted, ground_truth) else 0.0
