"""Declared response-length priors: the mean and tail a dataset's responses have with a model family, and where
the figures come from.

A user planning a run (`rlbench predict --lengths prior`) rarely knows the mean, let alone the tail, and most
public runs publish only the cap. A prior is the published measurement closest to a workload's dataset, prompt
and model: a log-normal through its mean and one tail quantile (rlbench.harness.perfmodel.lengths), before the
cap clips it. Only pairs with a citable source are here; any other pair has no prior, and says so.

The speed benchmarks keep `fixed_length` (every response at the cap): a prior is for planning, not for
equal work.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class LengthPrior:
    dataset: str  # the dataset registry's name
    models: tuple[str, ...]  # the model family's hub ids the measurement covers
    mean: float  # tokens, before the cap clips
    tail: float  # tokens at `tail_quantile`
    tail_quantile: float  # 0.9 (p90) or 0.99 (p99)
    source: str  # the citation, and how the two numbers follow from it


PRIORS = (
    # Qwen2.5-0.5B-Instruct's own GSM8K chain of thought, before RL has shortened it. The fit: median ~274
    # tokens and ~57% of responses longer than 256 (TRL's measurement) give a log-normal with sigma 0.385:
    # mean 295, p90 449. Cross-checked on verl's baseline logs, which use this workload's prompt ("Let's think
    # step by step and output the final answer after ####", temperature 1.0): the clipped mean this prior
    # gives is 290 at a 512-token cap against 297-314 logged at steps 0-10, and 231 at a 256-token cap
    # against 235-237 logged at steps 0-10 (2-8% low).
    LengthPrior(
        dataset="gsm8k",
        models=("Qwen/Qwen2.5-0.5B-Instruct",),
        mean=295.0,
        tail=449.0,
        tail_quantile=0.9,
        source=(
            "huggingface/trl issue #6263 (Qwen2.5-0.5B-Instruct on GSM8K: median ~274 tokens, ~57% past 256), "
            "checked against verl's baseline logs eric-haibin-lin/verl-data gsm8k/Qwen2.5-0.5B-bsz256_2-"
            "prompt1024-resp512-0.567.log and gsm8k/Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538.log"
        ),
    ),
)


def length_prior(dataset: str, model: str) -> LengthPrior | None:
    """The declared prior of this dataset with this model, or None where no source gives one."""
    return next((p for p in PRIORS if p.dataset == dataset and model in p.models), None)
