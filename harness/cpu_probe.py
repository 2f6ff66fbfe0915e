"""Measure this CPU's peak matmul FLOP/s and memory bandwidth once, and cache them.

The performance model's "cpu" hardware row has no datasheet: its peaks are what
this machine does, measured with torch (the library the frameworks compute with)
on a square fp32 matmul and a large tensor copy. The best of a few repeats is
kept (a peak, not a mean), cached in `$RLBENCH_CACHE/cpu_probe.json` keyed by
CPU model, thread count and torch version.

    python -m rlbench.cpu_probe
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rlbench.environment import cpu_model, package_version

MATMUL_N = 1024  # 2*N^3 = 2.1 GFLOP per matmul: long enough to time, short on a 2-core machine
COPY_BYTES = 256 * 2**20  # well past any cache, so the copy streams from DRAM
REPEATS = 5


def _cache_file() -> Path:
    root = Path(os.environ.get("RLBENCH_CACHE", Path.home() / ".cache" / "rlbench"))
    return root / "cpu_probe.json"


def _best_seconds(fn, repeats: int = REPEATS) -> float:
    fn()  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure() -> dict[str, float | int | str]:
    import torch

    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    matmul_s = _best_seconds(lambda: torch.mm(a, b))
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src))
    return {
        "fp32_flops_per_s": 2 * MATMUL_N**3 / matmul_s,
        # A copy reads and writes every byte: 2x the buffer size crosses the memory bus.
        "mem_bytes_per_s": 2 * COPY_BYTES / copy_s,
        "threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        "torch": torch.__version__,
        "method": f"best of {REPEATS}: torch.mm fp32 {MATMUL_N}^3; copy of {COPY_BYTES // 2**20} MiB fp32",
    }


def cpu_peaks(refresh: bool = False) -> dict[str, float | int | str]:
    """Measured peaks of this CPU, from the cache when it matches this machine and torch."""
    import torch

    key = {"cpu_model": cpu_model(), "threads": torch.get_num_threads(), "torch": package_version("torch")}
    cache = _cache_file()
    if not refresh and cache.is_file():
        cached = json.loads(cache.read_text())
        if all(cached.get(k) == v for k, v in key.items()):
            return cached
    result = measure() | key
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(cache)
    return result


if __name__ == "__main__":
    print(json.dumps(cpu_peaks(refresh=True), indent=2))
