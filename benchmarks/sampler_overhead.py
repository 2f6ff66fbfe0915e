"""Sampler overhead on the CPU default workload: alternate runs with and without the sampler.

Runs `rlbench run --framework trl --workload gsm8k-grpo-tiny` REPEATS times with the
sampler at 10 Hz and REPEATS times with it off (RLBENCH_SAMPLE_HZ=0), alternated so
drift in machine load hits both alike, and prints the ratio of median post-warm-up
step times (with / without).

    python benchmarks/sampler_overhead.py --repeats 3 --steps 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rlbench.harness.record.read import read_record


def one_run(out: Path, steps: int, rate_hz: str) -> float:
    env = {**os.environ, "RLBENCH_SAMPLE_HZ": rate_hz}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbench.harness",
            "run",
            "--framework",
            "trl",
            "--workload",
            "gsm8k-grpo-tiny",
            "--steps",
            str(steps),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    record = read_record(done.stdout.strip().splitlines()[-1])
    return record["summary"]["step_time_s"]["median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"10": [], "0": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for rate in ("10", "0"):
                times[rate].append(one_run(Path(tmp), args.steps, rate))
                print(f"sampler {rate:>2} Hz: median step {times[rate][-1]:.3f} s", flush=True)
    with_s, without_s = statistics.median(times["10"]), statistics.median(times["0"])
    print(f"median step time with sampler {with_s:.3f} s, without {without_s:.3f} s, ratio {with_s / without_s:.3f}")


if __name__ == "__main__":
    main()
