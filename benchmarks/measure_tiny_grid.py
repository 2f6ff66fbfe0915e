"""Measure TRL tiny GRPO runs over a grid of response lengths and model widths.

The measured side of the performance-model validation: each grid cell is a real
`rlbench run` (CPU, TRL GRPOTrainer) of `gsm8k-grpo-tiny` with the response length
and hidden size overridden; the record folders are listed in a CSV that
`benchmarks/validate_perfmodel.py` compares with the model's predictions.

    python benchmarks/measure_tiny_grid.py --out /tmp/grid --lengths 16,32,64 --widths 128,256,512
    python benchmarks/measure_tiny_grid.py --out /tmp/grid --steps 16 --repeats 3

With --repeats N every cell runs N times, in passes over the whole grid; odd passes go in
reverse order. A shared machine's speed drifts over minutes (the same cell measured 1.41 and
1.81 s in two grids run one after the other), and sequential cells would take that drift
into their ratios. Interleaved passes give every cell a run early and late, and the
validation takes the median over a cell's repeats.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from rlbench.harness.sweep.calibrate import tiny_workload


def pass_order(cells: list[tuple[int, int]], repeat: int) -> list[tuple[int, int]]:
    """The cells in the order pass `repeat` runs them: forward on even passes, reversed on odd."""
    return cells if repeat % 2 == 0 else cells[::-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lengths", default="16,32,64")
    parser.add_argument("--widths", default="128,256,512")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell, in interleaved passes")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cells = [(h, length) for h in map(int, args.widths.split(",")) for length in map(int, args.lengths.split(","))]
    rows = []
    for repeat in range(args.repeats):
        for hidden, length in pass_order(cells, repeat):
            workload = tiny_workload(args.out, hidden, length, args.steps)
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "rlbench.harness",
                    "run",
                    "--framework",
                    "trl",
                    "--workload",
                    str(workload),
                    "--out",
                    str(args.out / "records"),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(
                {
                    "hidden": hidden,
                    "response_length": length,
                    "repeat": repeat,
                    "record": done.stdout.strip().splitlines()[-1],
                }
            )
            print(rows[-1], flush=True)
    with (args.out / "grid.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
