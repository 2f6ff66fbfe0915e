"""The response lengths `rlbench predict` prices: given on the command line (`--lengths mean=1500,p90=3300`) or
measured by a run (`--lengths-from RUN`), applied to the workload's shape as a distribution
(rlbench.harness.perfmodel.lengths).

From a record, the mean is the median over post-warm-up steps of each step's mean response length, and the
tail is fitted so that the distribution reproduces what the framework logged of it: the step's longest
response, whose expected value over the step's responses the fit matches (verl, TRL), or else the share of
responses stopped at the cap (OpenRLHF logs only that). A run whose every response reached the cap, or whose
longest equals its mean, has no tail to fit: its lengths are equal.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import TAIL_Z, ResponseLengths, WorkloadShape

QUANTILE_NAMES = {"p90": 0.9, "p99": 0.99}


def refused(what: str, exc: ValueError) -> RLBenchError:
    """The user's one line for figures ResponseLengths refused: `what` (the option that gave them), then why."""
    return RLBenchError(f"{what}: {str(exc).removeprefix('ResponseLengths.')}")


def parse_lengths(text: str, cap: int) -> ResponseLengths:
    """`mean=1500,p90=3300` (or p99=) as a distribution capped at the workload's max new tokens."""
    fields: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in ("mean", *QUANTILE_NAMES):
            raise RLBenchError(f"--lengths {part!r}: give mean=TOKENS and one of p90=TOKENS, p99=TOKENS")
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            raise RLBenchError(f"--lengths {key}={raw.strip()}: must be a positive number of tokens")
        fields[key] = value
    tails = [k for k in QUANTILE_NAMES if k in fields]
    if "mean" not in fields or len(tails) != 1:
        raise RLBenchError(f"--lengths {text!r}: give mean=TOKENS and exactly one of p90=TOKENS, p99=TOKENS")
    try:
        return ResponseLengths(
            mean=fields["mean"],
            tail=fields[tails[0]],
            tail_quantile=QUANTILE_NAMES[tails[0]],
            cap=cap,
            source="--lengths",
        )
    except ValueError as exc:
        raise refused(f"--lengths {text}", exc) from None


def lengths_from_record(steps: Any, warmup_steps: int, cap: int, run: str) -> tuple[ResponseLengths | None, float]:
    """(the fitted distribution, or None where the run's lengths were equal; the mean) from a record's steps."""
    kept = steps[steps["step"] > warmup_steps]
    means = _finite(kept, "response_length_mean")
    if not means:
        raise RLBenchError(f"--lengths-from {run}: its steps log no response length; rerun it or give --lengths")
    mean = statistics.median(means)
    longest = _finite(kept, "response_length_max")
    for what, value in (("mean", mean), ("longest", statistics.median(longest) if longest else None)):
        if value is not None and not 0 < value <= cap:  # no run generates that: a damaged record
            raise RLBenchError(
                f"--lengths-from {run}: its {what} response length, {value:g} tokens, is not in (0, {cap}] (the run's "
                "cap); the record is damaged: measure another run or give --lengths"
            )
    clipped = _finite(kept, "response_clipped_fraction")
    responses = _finite(kept, "num_responses")
    source = f"--lengths-from {run} (median of {len(means)} post-warm-up steps)"
    if mean >= cap * (1 - 1e-6):
        return None, mean  # every response at the cap
    if longest and responses:
        target = statistics.median(longest)
        if target <= mean * (1 + 1e-3):
            return None, mean
        return _fit(mean, cap, source, lambda d: d.expected_longest(statistics.median(responses)) - target), mean
    if clipped and statistics.median(clipped) > 0:
        share = statistics.median(clipped)
        return _fit(mean, cap, source, lambda d: d.clipped_fraction - share), mean
    raise RLBenchError(
        f"--lengths-from {run}: its framework logs neither the longest response nor the clipped share of a step; "
        "give --lengths mean=...,p90=... instead"
    )


def fit_to_longest(mean: float, longest: float, responses: float, cap: int) -> ResponseLengths | None:
    """The distribution whose expected longest of `responses` is the logged `longest`; None without a tail."""
    if not (math.isfinite(mean) and math.isfinite(longest) and math.isfinite(responses)) or mean <= 0:
        return None
    if longest <= mean * (1 + 1e-3) or mean >= cap * (1 - 1e-6):
        return None
    return _fit(mean, cap, "a step's logged mean and longest", lambda d: d.expected_longest(responses) - longest)


def _finite(frame: Any, column: str) -> list[float]:
    if column not in frame:
        return []
    return [float(v) for v in frame[column] if v is not None and math.isfinite(float(v))]


def _fit(mean: float, cap: int, source: str, miss: Any) -> ResponseLengths:
    """The p90 (between the mean and the widest a log-normal allows) at which `miss` changes sign, by bisection;
    the edge where it does not (a logged longest beyond what any p90 gives: the widest tail)."""
    z = TAIL_Z[0.9]
    low, high = mean * (1 + 1e-6), mean * math.exp(z * z / 2) * (1 - 1e-6)

    def at(tail: float) -> ResponseLengths:
        return ResponseLengths(mean=mean, tail=tail, tail_quantile=0.9, cap=cap, source=source)

    if miss(at(high)) <= 0:
        return at(high)
    if miss(at(low)) >= 0:
        return at(low)
    # bounded: halvings until the bracket is below a hundredth of a token (each costs an expected-longest integral)
    for _ in range(max(1, math.ceil(math.log2((high - low) / 0.01)))):
        middle = (low + high) / 2
        low, high = (middle, high) if miss(at(middle)) < 0 else (low, middle)
    return at((low + high) / 2)


def with_lengths(shape: WorkloadShape, lengths: ResponseLengths | None, mean: float | None = None) -> WorkloadShape:
    """The shape priced with these lengths: a distribution, or (None with a mean) every response at the mean."""
    if lengths is not None:
        return dataclasses.replace(
            shape,
            fixed_length=False,
            mean_response_len=lengths.mean,
            response_tail_len=lengths.tail,
            response_tail_quantile=lengths.tail_quantile,
        )
    if mean is not None:
        return dataclasses.replace(
            shape, fixed_length=True, mean_response_len=None, response_tail_len=None, response_len=max(1, round(mean))
        )
    return shape
