"""Helpers every framework adapter shares: the GPUs here, counts read from a framework's logged means, and the
requirements a framework declares (its pins, read from its installed metadata)."""

from __future__ import annotations

import importlib.util
import math
from typing import TYPE_CHECKING

from rlbench.run.environment import gpus

if TYPE_CHECKING:
    from packaging.requirements import Requirement


def gpu_count() -> int:
    """NVIDIA GPUs here (nvidia-ml-py, else torch's CUDA count)."""
    found = len(gpus()[0])
    if found or importlib.util.find_spec("pynvml") is not None:
        return found
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


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
