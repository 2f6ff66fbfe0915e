"""Measure this CPU's peak matmul FLOP/s, memory bandwidth and per-layer op latency once, and cache them.

The performance model's "cpu" hardware row has no datasheet: its numbers are what this machine
does, measured with torch (the library the frameworks compute with), best of several repeats,
cached in `$RLBENCH_CACHE/cpu_probe.json` keyed by CPU model, threads, torch version and
PROBE_VERSION (about 10 s on 2 cores). A framework whose workers run with fewer torch threads
(a Ray actor's OMP_NUM_THREADS) gets a probe at that count, cached beside it. What each figure
measures and why: docs/cpu-probe.md.

    python -m rlbench.harness.predict.cpu_probe
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rlbench.harness.atomic import write_bytes
from rlbench.harness.spec.environment import cpu_model, package_version

PROBE_VERSION = 7  # bump when a measurement changes, so cached probes are re-measured (docs/cpu-probe.md)
RATE_ROWS = (16, 64, 256, 1024, 4096)
RATE_DIMS = (64, 128, 256, 512, 1024)
TRAIN_ROWS = (64, 256, 1024, 2048)  # up to a 16-sequence micro-batch of ~128 tokens
TRAIN_SEQ_LEN = 128  # tokens per sequence of the training probe (a GSM8K prompt and response)
TRAIN_HEAD_DIM = 64
STREAM_ROWS = (16, 64, 256)  # sequences per decode step
STREAM_POOL_BYTES = 64 * 2**20  # many times any per-core L2, so a weight is evicted before its reuse
RATE_MIN_S = 0.05  # repeat a small matmul until this long has passed, so its best repeat is a clean one
MATMUL_N = 1024  # 2*N^3 = 2.1 GFLOP per matmul: long enough to time, short on a 2-core machine
COPY_BYTES = 256 * 2**20  # well past any cache, so the copy streams from DRAM
REPEATS = 5
LATENCY_REPEATS = 200  # ~0.3 ms each: many tries, so one lands between other processes' time slices
UNIT = {"hidden": 64, "heads": 2, "kv_heads": 1, "head_dim": 32, "ffn": 172, "cache": 16}


def _cache_file(threads: int | None = None) -> Path:
    """The probe at this process's own thread count, or at another count (a framework's workers) beside it."""
    from rlbench.harness.settings import cache_root

    return cache_root() / ("cpu_probe.json" if threads is None else f"cpu_probe-{threads}-threads.json")


def _best_seconds(fn, repeats: int = REPEATS) -> float:
    fn()  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _decoder_layer(h: int, heads: int, kv: int, hd: int, ffn: int):
    """A Qwen2-style decoder layer (plain torch, no framework): forward(x, cos, sin, k_cache, v_cache)."""
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(h))

        def forward(self, x):
            x32 = x.to(torch.float32)
            x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
            return self.weight * x32.to(x.dtype)

    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = RMSNorm(), RMSNorm()
            self.q, self.k, self.v = nn.Linear(h, heads * hd), nn.Linear(h, kv * hd), nn.Linear(h, kv * hd)
            self.o = nn.Linear(heads * hd, h, bias=False)
            self.gate, self.up = nn.Linear(h, ffn, bias=False), nn.Linear(h, ffn, bias=False)
            self.down = nn.Linear(ffn, h, bias=False)

        def forward(self, x, cos, sin, k_cache, v_cache):
            b, t, _ = x.shape
            y = self.norm1(x)
            q = self.q(y).view(b, t, heads, hd).transpose(1, 2)
            k = self.k(y).view(b, t, kv, hd).transpose(1, 2)
            v = self.v(y).view(b, t, kv, hd).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k, v = torch.cat((k_cache, k), dim=2), torch.cat((v_cache, v), dim=2)
            k = k[:, :, None].expand(b, kv, heads // kv, k.shape[2], hd).reshape(b, heads, -1, hd)
            v = v[:, :, None].expand(b, kv, heads // kv, v.shape[2], hd).reshape(b, heads, -1, hd)
            # a training sequence (empty cache) is causal; one decode token sees the whole cache
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, heads * hd))
            y = self.norm2(x)
            return x + self.down(nn.functional.silu(self.gate(y)) * self.up(y))

    return Layer()


def _unit_step():
    """The latency unit: the UNIT layer and one decode step's inputs, batch 1."""
    import torch

    h, heads, kv, hd, ffn, cache = (UNIT[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn", "cache"))
    args = (
        torch.randn(1, 1, h),
        torch.randn(1, 1, 1, hd),
        torch.randn(1, 1, 1, hd),
        torch.randn(1, kv, cache, hd),
        torch.randn(1, kv, cache, hd),
    )
    return _decoder_layer(h, heads, kv, hd, ffn).eval(), args


def measure_op_latency(repeats: int = LATENCY_REPEATS) -> float:
    """Seconds of one decode step of one tiny decoder layer (best of `repeats`)."""
    import torch

    layer, args = _unit_step()
    with torch.no_grad():
        for _ in range(5):
            layer(*args)
        return _best_seconds(lambda: layer(*args), repeats)


def _best_of_budget(fn) -> float:
    """Best repeat of fn, repeated at least REPEATS times and for at least RATE_MIN_S."""
    fn()
    best, start, count = float("inf"), time.perf_counter(), 0
    while count < REPEATS or time.perf_counter() - start < RATE_MIN_S:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        count += 1
    return best


def measure_matmul_rates() -> list[list[float]]:
    """[[rows, dim, FLOP/s], ...] over RATE_ROWS x RATE_DIMS (best repeat of each shape)."""
    import torch

    rates = []
    for dim in RATE_DIMS:
        w = torch.randn(dim, dim)  # [out, in], as nn.Linear stores it
        for rows in RATE_ROWS:
            x = torch.randn(rows, dim)
            rates.append([rows, dim, 2 * rows * dim * dim / _best_of_budget(lambda: torch.nn.functional.linear(x, w))])
    return rates


def train_layer_shape(dim: int) -> dict[str, int]:
    """The training probe's layer at hidden `dim`: the tiny workloads' shape (head_dim 64, half as
    many KV heads as query heads, Qwen2.5's ffn = 2.6875 x hidden)."""
    heads = max(dim // TRAIN_HEAD_DIM, 1)
    return {
        "hidden": dim,
        "heads": heads,
        "kv_heads": max(heads // 2, 1),
        "head_dim": TRAIN_HEAD_DIM,
        "ffn": round(2.6875 * dim),
    }


def train_layer_flops(shape: dict[str, int], sequences: int, length: int) -> float:
    """The performance model's own count for one layer's forward + backward over `sequences`
    causal sequences of `length` (perfmodel/flops.py: 3 x (2N t + 4 A t(t+1)/2)), so that a
    stage's FLOPs divided by this rate give back the measured time on the probe's shape."""
    from rlbench.harness.perfmodel import ModelArch, flops

    arch = ModelArch(
        layers=1, vocab=1, qkv_bias=True, **{k: shape[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn")}
    )
    head = 2 * flops.head_params(arch) * length  # the probe has no output head
    return 3 * sequences * (flops.sequence_forward_flops(arch, length) - head)


def measure_train_matmul_rates() -> list[list[float]]:
    """[[rows, dim, FLOP/s], ...]: forward + backward of one Qwen2-style decoder layer over
    TRAIN_ROWS tokens (sequences of TRAIN_SEQ_LEN, fewer rows: one sequence) x RATE_DIMS.

    The whole layer, not its matmuls alone: a trainer's forward and backward also run the
    norms, rotary embedding, causal SDPA, activation and residuals between the GEMMs, one
    after another. A plain Hugging Face training step at h512 spent 0.43 of its 0.68 s in
    aten::mm here; a rate measured on GEMMs alone leaves the rest out."""
    import torch

    rates = []
    for dim in RATE_DIMS:
        shape = train_layer_shape(dim)
        hd, kv = shape["head_dim"], shape["kv_heads"]
        layer = _decoder_layer(dim, shape["heads"], kv, hd, shape["ffn"])
        for rows in TRAIN_ROWS:
            length = min(rows, TRAIN_SEQ_LEN)
            sequences = rows // length
            x = torch.randn(sequences, length, dim, requires_grad=True)
            cos, sin = torch.randn(1, 1, length, hd), torch.randn(1, 1, length, hd)
            empty = torch.zeros(sequences, kv, 0, hd)

            def step():
                layer(x, cos, sin, empty, empty).sum().backward()

            rates.append([rows, dim, train_layer_flops(shape, sequences, length) / _best_of_budget(step)])
    return rates


def measure_streamed_matmul_rates() -> list[list[float]]:
    """[[rows, dim, FLOP/s], ...] over STREAM_ROWS x RATE_DIMS, each matmul on the next weight of a pool."""
    import torch

    rates = []
    for dim in RATE_DIMS:
        pool = [torch.randn(dim, dim) for _ in range(max(2, STREAM_POOL_BYTES // (dim * dim * 4)))]
        for rows in STREAM_ROWS:
            x, turn = torch.randn(rows, dim), [0]

            def step():
                turn[0] = (turn[0] + 1) % len(pool)
                torch.nn.functional.linear(x, pool[turn[0]])

            rates.append([rows, dim, 2 * rows * dim * dim / _best_of_budget(step)])
    return rates


def l2_cache_bytes() -> float | None:
    """One core's L2 from sysfs (Linux), None where it cannot be read."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")) if root.is_dir() else ():
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 2**10, "M": 2**20}.get(size[-1:], 1)
                return float(size.rstrip("KM")) * scale
        except (OSError, ValueError):
            return None
    return None


def measure() -> dict[str, Any]:
    import torch

    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    matmul_s = _best_seconds(lambda: torch.mm(a, b))
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    copy_s = _best_seconds(lambda: dst.copy_(src))
    unit = ", ".join(f"{k} {v}" for k, v in UNIT.items())
    l2 = l2_cache_bytes()
    return {
        "fp32_flops_per_s": 2 * MATMUL_N**3 / matmul_s,
        # A copy reads and writes every byte: 2x the buffer size crosses the memory bus.
        "mem_bytes_per_s": 2 * COPY_BYTES / copy_s,
        "op_latency_s": measure_op_latency(),
        "matmul_rates": measure_matmul_rates(),
        "train_matmul_rates": measure_train_matmul_rates(),
        "streamed_matmul_rates": measure_streamed_matmul_rates(),
        # Each thread's GEMM block reads its share of the weights through its own core's L2.
        "cache_bytes": None if l2 is None else l2 * torch.get_num_threads(),
        "threads": torch.get_num_threads(),
        "cpu_model": cpu_model(),
        "torch": torch.__version__,
        "method": f"best of {REPEATS}: torch.mm fp32 {MATMUL_N}^3; copy of {COPY_BYTES // 2**20} MiB fp32; "
        f"best of {LATENCY_REPEATS}: one decode step of a Qwen2-style layer ({unit}), batch 1; "
        f"nn.functional.linear [rows x dim] x [dim x dim], rows {RATE_ROWS}, dims {RATE_DIMS}; "
        f"decoder-layer forward + backward, rows {TRAIN_ROWS} (sequences of {TRAIN_SEQ_LEN}), dims {RATE_DIMS}; "
        f"nn.functional.linear over a {STREAM_POOL_BYTES // 2**20} MiB weight pool, rows {STREAM_ROWS}; "
        "L2 from /sys/devices/system/cpu/cpu0/cache",
    }


# Probes this process measured but did not cache (a busy host, a read-only cache folder), by their key: one run's
# prediction asks for the peaks several times (its row, its canonical count, MFU's peak), and each would otherwise
# measure again, about 10 s apiece on 2 cores.
_UNCACHED: dict[str, dict[str, Any]] = {}


def cpu_peaks(refresh: bool = False, threads: int | None = None) -> dict[str, Any]:
    """Measured peaks of this CPU, from the cache when it matches this machine, torch and the probe (or from this
    process's own uncached measurement of them). threads: measure with torch at that many threads (a framework's
    workers that run with fewer than this process), cached apart; None: this process's own."""
    import torch

    own = torch.get_num_threads()
    threads = own if threads is None else threads
    key = {
        "cpu_model": cpu_model(),
        "threads": threads,
        "torch": package_version("torch"),
        "probe_version": PROBE_VERSION,
    }
    cache = _cache_file(None if threads == own else threads)
    if not refresh and cache.is_file():
        try:
            cached = json.loads(cache.read_text())
        except (OSError, ValueError):  # unreadable or damaged: measured again below, and rewritten
            cached = {}
        if isinstance(cached, dict) and all(cached.get(k) == v for k, v in key.items()):
            return cached
    memo = json.dumps(key, sort_keys=True)
    if not refresh and memo in _UNCACHED:
        return _UNCACHED[memo]
    busy, start = host_busy_pct(), cpu_clock()
    torch.set_num_threads(threads)
    try:
        result = measure() | key
    finally:
        torch.set_num_threads(own)
    busy = max(busy, others_busy_pct(start))  # before it began, or while it ran
    result["host_busy_pct"] = busy
    if busy > BUSY_HOST_PCT:  # a probe beside other work reads the machine slow for good: used now, never cached
        _UNCACHED[memo] = result
        return result
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(cache, json.dumps(result, indent=2).encode())
    except OSError:  # a read-only or full cache folder: the measurement holds for this process, uncached
        _UNCACHED[memo] = result
    return result


# Host CPU in use by others (% of all cores) above which a probe is not cached. A probe cached on this workplace's
# machine while tests ran read its 1024-cube matmul at 49 GFLOP/s (182 when quiet) and its streamed matmuls 1,000x
# slow, and every later prediction and MFU on that machine inherited them.
BUSY_HOST_PCT = 25.0


def host_busy_pct(interval_s: float = 0.3) -> float:
    """The host's CPU in use (% of all cores) over `interval_s` before the probe starts."""
    import psutil

    return float(psutil.cpu_percent(interval=interval_s))


def cpu_clock() -> tuple[float, float, float]:
    """(CPU seconds the host spent busy, over all cores; CPU seconds this process spent; wall seconds), now."""
    import psutil

    host = psutil.cpu_times()
    own = psutil.Process().cpu_times()
    return sum(host) - host.idle - getattr(host, "iowait", 0.0), own.user + own.system, time.monotonic()


def others_busy_pct(since: tuple[float, float, float]) -> float:
    """Other processes' CPU use (% of all cores) since a `cpu_clock()` reading: the host's busy time less this
    process's. The check before the probe sees only 0.3 s: on this workplace's machine a 1-thread probe taken
    while short test runs started beside it read its training layers 25-45% slower than a quiet one, and was
    cached. 0 for a window under 1 s, which the clock's 10 ms ticks cannot resolve (a real probe takes 10 s
    or more)."""
    import psutil

    host, own, wall = (now - then for now, then in zip(cpu_clock(), since))
    if wall < 1.0:
        return 0.0
    return max(0.0, 100.0 * (host - own) / (wall * (psutil.cpu_count() or 1)))


def best_flops_per_s(peaks: dict[str, Any] | None = None) -> float:
    """The highest FLOP rate any of the probe's matmuls reached here: MFU's peak on a CPU. The 1024-cube matmul
    that gives the row's roofline peak is not always the fastest shape (cache-resident shapes ran 4x faster on
    this workplace's machine), and an MFU over a peak some matmul beats could exceed 1."""
    peaks = peaks if peaks is not None else cpu_peaks()
    tables = ("matmul_rates", "train_matmul_rates", "streamed_matmul_rates")
    rates = [float(row[-1]) for table in tables for row in peaks.get(table, ()) if row]
    return max([float(peaks["fp32_flops_per_s"]), *rates])


def cpu_row(peaks: dict[str, Any] | None = None, threads: int | None = None):
    """The performance model's "cpu" Hardware row from the (cached) measurements, at this process's threads or at
    `threads`."""
    from rlbench.harness.perfmodel import cpu_hardware

    peaks = peaks if peaks is not None else cpu_peaks(threads=threads)
    return cpu_hardware(
        peaks["fp32_flops_per_s"],
        peaks["mem_bytes_per_s"],
        op_latency_s=peaks.get("op_latency_s"),
        matmul_rates=tuple(tuple(row) for row in peaks.get("matmul_rates", ())),
        train_matmul_rates=tuple(tuple(row) for row in peaks.get("train_matmul_rates", ())),
        streamed_matmul_rates=tuple(tuple(row) for row in peaks.get("streamed_matmul_rates", ())),
        cache_bytes=peaks.get("cache_bytes"),
        source=f"measured on {peaks['cpu_model']} at {peaks.get('threads')} torch threads: {peaks['method']}",
    )


if __name__ == "__main__":
    print(json.dumps(cpu_peaks(refresh=True), indent=2))
