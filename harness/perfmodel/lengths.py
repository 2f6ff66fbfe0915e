"""Response lengths as a distribution, and what an engine's decode loop needs from it.

A synchronous RL step decodes until the last sample of its batch has finished: its decode depth is the
longest response of the batch, not the mean, and that depth does not shrink with more GPUs (each engine
still steps until its own longest sample ends). The mean sets the tokens, and so the work; the tail sets
the depth. A workload that gives only a cap (max new tokens) prices every response at the cap
(`fixed_length`); one that gives the mean and one tail quantile gets this distribution:

* Log-normal through the mean and the tail quantile (p90 or p99), clipped at the cap: the engine stops a
  sample at max new tokens, so P(length = cap) is the clipped fraction. Log-normal because response
  lengths of reasoning models are right-skewed and positive (DAPO's and verl's length histograms); two
  numbers a framework logs (verl's response_length/mean and /max, TRL's completions/mean_length) or a
  user reads off a run pin it down. The fit ignores the clipping (the mean given is taken as the
  unclipped one): with a few per cent clipped the difference is a few per cent of the mean.
* Expected longest of n samples: E[max] = integral over [0, cap] of 1 - F(t)^n dt, the depth of an engine
  whose batch is n sequences. It grows with the tail at a fixed mean and, slowly, with n; at n = 1 it is
  the mean.
* Continuous batching: sequences leave the engine's batch as they finish, so after t decode steps
  n (1 - F(t)) are still live; the tokens are n x mean whatever the shape.

    from rlbench.harness.perfmodel.lengths import ResponseLengths
    lengths = ResponseLengths(mean=1000, tail=2200, tail_quantile=0.9, cap=8192)
    lengths.expected_longest(256)    # ~4,600 decode steps for an engine holding 256 sequences
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

# Standard normal quantiles of the tail quantiles a workload may give.
TAIL_Z = {0.9: 1.2815515655446004, 0.99: 2.3263478740408408}
# Points of the integral for the expected longest: the integrand is smooth and bounded by 1, so the
# trapezoid rule's error is below 0.1% of the cap at this count.
_POINTS = 2048


@dataclass(frozen=True, kw_only=True, slots=True)
class ResponseLengths:
    """A step's response lengths in tokens: the mean, one tail quantile, and the cap no response exceeds."""

    mean: float
    tail: float  # the length at `tail_quantile`
    tail_quantile: float = 0.9  # 0.9 (p90) or 0.99 (p99)
    cap: int  # max new tokens
    source: str = ""  # where the figures come from: a prior's citation, the command line, a record

    def __post_init__(self) -> None:
        own = "ResponseLengths"
        if self.tail_quantile not in TAIL_Z:
            raise ValueError(f"{own}.tail_quantile={self.tail_quantile!r}: must be 0.9 (p90) or 0.99 (p99)")
        for name in ("mean", "tail"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{own}.{name}={value!r}: must be a finite number of tokens")
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1:
            raise ValueError(f"{own}.cap={self.cap!r}: must be a positive integer (max new tokens)")
        if not 0 < self.mean <= self.cap:
            raise ValueError(f"{own}.mean={self.mean!r}: must be in (0, cap={self.cap}]")
        if self.tail <= self.mean:
            raise ValueError(
                f"{own}.tail={self.tail!r}: the p{round(self.tail_quantile * 100)} length must exceed the mean "
                f"{self.mean:g} (response lengths are right-skewed); for equal lengths use fixed_length"
            )
        ratio = self.tail / self.mean
        z = TAIL_Z[self.tail_quantile]
        if 2 * math.log(ratio) > z * z:
            raise ValueError(
                f"{own}.tail={self.tail!r}: no log-normal with mean {self.mean:g} has its "
                f"p{round(self.tail_quantile * 100)} above {self.mean * math.exp(z * z / 2):.0f}; "
                "give the p99 for a heavier tail"
            )

    @property
    def sigma(self) -> float:
        """The log-normal's shape: ln(tail / mean) = z sigma - sigma^2 / 2, the smaller root."""
        z = TAIL_Z[self.tail_quantile]
        return z - math.sqrt(z * z - 2 * math.log(self.tail / self.mean))

    @property
    def mu(self) -> float:
        return math.log(self.mean) - self.sigma**2 / 2

    def cdf(self, tokens: float) -> float:
        """P(a response is shorter than `tokens`); 1 at the cap, where the engine stops every sample."""
        if tokens >= self.cap:
            return 1.0
        if tokens <= 0:
            return 0.0
        return 0.5 * (1 + math.erf((math.log(tokens) - self.mu) / (self.sigma * math.sqrt(2))))

    @property
    def clipped_fraction(self) -> float:
        """Share of responses stopped at the cap."""
        return 1.0 - self.cdf(self.cap - 1e-9)

    def expected_longest(self, n: float) -> float:
        """Expected longest of `n` responses (n >= 1): the decode steps of an engine whose batch is n."""
        return _expected_longest(self.mean, self.tail, self.tail_quantile, self.cap, max(1.0, float(n)))

    def live_after(self, steps: float, n: float) -> float:
        """Sequences of a batch of `n` still decoding after `steps` decode steps (continuous batching)."""
        return n * (1.0 - self.cdf(steps))

    def with_tail(self, factor: float) -> ResponseLengths:
        """The same mean with the tail's excess over the mean times `factor` (a sensitivity check); a tail
        a log-normal cannot take at this mean is held at the largest it can."""
        z = TAIL_Z[self.tail_quantile]
        widest = self.mean * math.exp(z * z / 2) * (1 - 1e-9)
        tail = min(self.mean + factor * (self.tail - self.mean), widest)
        return ResponseLengths(
            mean=self.mean, tail=tail, tail_quantile=self.tail_quantile, cap=self.cap, source=self.source
        )


@functools.lru_cache(maxsize=4096)
def _expected_longest(mean: float, tail: float, quantile: float, cap: int, n: float) -> float:
    """The integral behind ResponseLengths.expected_longest, cached: a layout sweep asks for the same few
    batch sizes thousands of times."""
    lengths = ResponseLengths(mean=mean, tail=tail, tail_quantile=quantile, cap=cap)
    width = cap / _POINTS
    values = [1.0 - lengths.cdf(i * width) ** n for i in range(_POINTS + 1)]
    return width * (sum(values) - (values[0] + values[-1]) / 2)
