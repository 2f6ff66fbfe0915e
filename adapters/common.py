"""Helpers every framework adapter shares: counts read from a framework's logged means, a step's response-length
quantiles from each response's length, and the requirements a framework declares (its pins, read from its
installed metadata)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.requirements import Requirement


def whole_count(value: float) -> float:
    """A count rebuilt from logged means (tokens = mean length x responses), rounded; NaN stays NaN."""
    return round(value) if math.isfinite(value) else math.nan


def declared_requirements(distribution: str) -> list[Requirement]:
    """The installed distribution's own `Requires-Dist` lines as `packaging` Requirements ([] if not installed)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    try:
        return [Requirement(line) for line in importlib.metadata.requires(distribution) or []]
    except importlib.metadata.PackageNotFoundError:
        return []


def length_quantiles(lengths: list[int]) -> dict[str, float]:
    """response_length_p50/p90/p99 of one step's responses, from each one's generated tokens: the nearest rank,
    a length some response had."""
    if not lengths:
        return {}
    ordered = sorted(lengths)
    return {
        f"response_length_p{round(q * 100)}": float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])
        for q in (0.5, 0.9, 0.99)
    }
