"""Helpers every framework adapter shares: the GPUs here, and counts read from a framework's logged means."""

from __future__ import annotations

import importlib.util
import math

from rlbench.run.environment import gpus


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
