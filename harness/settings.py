"""rlbench's environment settings: each variable is read and checked here, once.

A bad value is one `RLBenchError` naming the variable, the value and the fix,
never a `ValueError` traceback from wherever the value was first used.

    RLBENCH_RUN_TIMEOUT_S=600 RLBENCH_CACHE=/scratch/rlbench rlbench run --framework trl --workload gsm8k-grpo-tiny
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from rlbench.harness.errors import RLBenchError

RUN_TIMEOUT_ENV, CACHE_ENV = "RLBENCH_RUN_TIMEOUT_S", "RLBENCH_CACHE"
DEFAULT_TIMEOUT_S = 7200.0  # per run
MAX_TIMEOUT_S = 30 * 86400.0  # a month: longer is a typo (or inf), and no run is watched that long


def env_number(
    name: str,
    default: float | None,
    *,
    unit: str,
    low: float = 0.0,
    high: float = math.inf,
    allow_zero: bool = False,
    example: float | None = None,
    least: float | None = None,
) -> float | None:
    """A finite number from `name` (default when unset or empty): low < value <= high (or least <= value <= high
    when `least` is given), or exactly 0 when allowed; NaN and infinity never pass."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    in_range = (least <= value if least is not None else low < value) and value <= high
    if not (math.isfinite(value) and (value == 0 and allow_zero or in_range)):  # NaN fails every comparison
        bounds = (f"at least {least:g}" if least is not None else f"above {low:g}") + (
            "" if math.isinf(high) else f" and at most {high:g}"
        )
        raise RLBenchError(
            f"{name}={raw!r}: expected a number of {unit} {bounds}{' (or 0)' if allow_zero else ''}, "
            f"e.g. {example if example is not None else default:g}; fix it or unset it"
        )
    return value


def run_timeout_s() -> float:
    """Seconds one run may take before the runner stops it ($RLBENCH_RUN_TIMEOUT_S)."""
    return env_number(RUN_TIMEOUT_ENV, DEFAULT_TIMEOUT_S, unit="seconds", high=MAX_TIMEOUT_S)


# The sampler's default rates. With GPUs, 10 Hz: board power is integrated into energy and a kernel burst is
# short. Without, 4 Hz: the process-tree walk is most of the sampler's cost, and on a 2-core CPU lane 10 Hz took
# about 3% of a core, more than the framework can spare (issue 34); a CPU-lane step of 1-3 s still gets 4-12
# samples.
GPU_SAMPLE_HZ, CPU_SAMPLE_HZ = 10.0, 4.0


def sample_hz(gpus: bool = True) -> float:
    """$RLBENCH_SAMPLE_HZ: the telemetry sampler's rate (default GPU_SAMPLE_HZ on a host with GPUs, else
    CPU_SAMPLE_HZ; 0 turns sampling off for overhead A/B runs)."""
    # At least one sample a minute: a slower rate cannot see a step, and its period overflows the sampler's clock.
    default = GPU_SAMPLE_HZ if gpus else CPU_SAMPLE_HZ
    return env_number("RLBENCH_SAMPLE_HZ", default, unit="Hz", least=1 / 60, high=1000.0, allow_zero=True)


def gpu_hour_usd(hardware_default: float | None) -> float | None:
    """$RLBENCH_GPU_HOUR_USD, else the hardware table's cited price (None: unknown, no cost is given)."""
    return env_number("RLBENCH_GPU_HOUR_USD", hardware_default, unit="USD per GPU-hour", allow_zero=True, example=2.5)


def kwh_usd() -> float:
    """$RLBENCH_KWH_USD: the price of energy (default 0, energy not priced)."""
    return env_number("RLBENCH_KWH_USD", 0.0, unit="USD per kWh", allow_zero=True, example=0.15)


def nccl_log() -> bool:
    """$RLBENCH_NCCL_LOG: log the framework's NCCL collectives into comm.parquet (1/true/yes; default off)."""
    raw = os.environ.get("RLBENCH_NCCL_LOG", "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise RLBenchError(f"RLBENCH_NCCL_LOG={raw!r}: expected 1 or 0 (true/false); fix it or unset it")


def ray_scratch() -> str | None:
    """$RLBENCH_RAY_SCRATCH: where a sweep's Ray job unpacks its run (default: the node's temp folder)."""
    return os.environ.get("RLBENCH_RAY_SCRATCH", "").strip() or None


def check_environment() -> None:
    """Parse every setting a run reads, so a bad one is refused before anything is built or launched."""
    run_timeout_s(), cache_root(), sample_hz(), gpu_hour_usd(None), kwh_usd(), nccl_log()


def cache_root() -> Path:
    """rlbench's cache folder ($RLBENCH_CACHE, default ~/.cache/rlbench): tiny models, CPU probe, floors."""
    raw = os.environ.get(CACHE_ENV, "").strip()
    root = Path(raw).expanduser() if raw else Path.home() / ".cache" / "rlbench"
    for candidate in [*reversed(root.parents), root]:
        if candidate.exists() and not candidate.is_dir():
            raise RLBenchError(
                f"{CACHE_ENV}={raw}: {candidate} is a file, not a folder; point {CACHE_ENV} "
                "at a folder (it is created if missing) or unset it"
            )
    return root
