"""Measure what the sampler costs a CPU-bound workload: wall time with and without it, alternated.

A fixed pure-Python loop (calibrated once to about `--seconds`) runs in `--workers`
child processes of one root process, `--repeats` times without and with a sampler
on that root, alternating so that drift (thermal, other load) hits both arms alike.
Prints the median wall times, their ratio and the sampler's own CPU seconds.

    python -m rlbench.harness.telemetry.overhead --seconds 3 --repeats 3 --rate-hz 10 --workers 1
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rlbench.harness.telemetry.sampler import start_sampler

_CHILD = "import sys\nt = 0\nfor i in range(int(sys.argv[1])):\n    t += i * i\n"
_ROOT = (
    "import subprocess, sys\n"
    "n, workers, child = sys.argv[1], int(sys.argv[2]), sys.argv[3]\n"
    "procs = [subprocess.Popen([sys.executable, '-c', child, n]) for _ in range(workers)]\n"
    "sys.exit(max(p.wait() for p in procs))\n"
)


def _run(iterations: int, workers: int, rate_hz: float | None, out_dir: Path) -> tuple[float, float]:
    """(workload wall seconds, sampler CPU seconds) of one run; rate_hz None runs without a sampler."""
    start = time.perf_counter()
    root = subprocess.Popen([sys.executable, "-c", _ROOT, str(iterations), str(workers), _CHILD])
    handle = start_sampler(out_dir / "telemetry.parquet", root.pid, rate_hz) if rate_hz else None
    root.wait()
    elapsed = time.perf_counter() - start
    if handle is None:
        return elapsed, 0.0
    handle.stop()
    return elapsed, float(handle.notes().get("sampler_cpu_s", float("nan")))


def _calibrate(seconds: float) -> int:
    probe = 2_000_000
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _CHILD, str(probe)], check=True)
    return int(probe * seconds / (time.perf_counter() - start))


def measure_overhead(seconds: float = 3.0, repeats: int = 3, rate_hz: float = 10.0, workers: int = 1) -> dict[str, Any]:
    iterations = _calibrate(seconds)
    without, with_sampler, sampler_cpu = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            without.append(_run(iterations, workers, None, Path(tmp))[0])
            elapsed, cpu = _run(iterations, workers, rate_hz, Path(tmp))
            with_sampler.append(elapsed)
            sampler_cpu.append(cpu)
    return {
        "rate_hz": rate_hz,
        "workers": workers,
        "without_s": without,
        "with_s": with_sampler,
        "ratio_median": statistics.median(with_sampler) / statistics.median(without),
        "sampler_cpu_s": sampler_cpu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlbench.harness.telemetry.overhead", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate-hz", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    result = measure_overhead(args.seconds, args.repeats, args.rate_hz, args.workers)
    print(f"without sampler: {', '.join(f'{s:.3f}' for s in result['without_s'])} s")
    print(f"with sampler at {result['rate_hz']:g} Hz: {', '.join(f'{s:.3f}' for s in result['with_s'])} s")
    print(f"median ratio with/without: {result['ratio_median']:.4f}  (workers={result['workers']})")
    print(f"sampler CPU per run: {', '.join(f'{s:.2f}' for s in result['sampler_cpu_s'])} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
