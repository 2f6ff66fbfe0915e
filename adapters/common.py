"""Helpers every framework adapter shares: counts read from a framework's logged means, and the
requirements a framework declares (its pins, read from its installed metadata)."""

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
