"""Measure TRL tiny GRPO runs over a grid of response lengths and model widths.

The measured side of the performance-model validation: each grid cell is a real
`rlbench run` (CPU, TRL GRPOTrainer) of `gsm8k-grpo-tiny` with the response length
and hidden size overridden; the record folders are listed in a CSV that
`benchmarks/validate_perfmodel.py` compares with the model's predictions.

    python benchmarks/measure_tiny_grid.py --out /tmp/grid --lengths 16,32,64 --widths 128,256,512
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from rlbench.calibrate import tiny_workload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lengths", default="16,32,64")
    parser.add_argument("--widths", default="128,256,512")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for hidden in map(int, args.widths.split(",")):
        for length in map(int, args.lengths.split(",")):
            workload = tiny_workload(args.out, hidden, length, args.steps)
            done = subprocess.run([sys.executable, "-m", "rlbench", "run", "--framework", "trl", "--workload",
                                   str(workload), "--out", str(args.out / "records")],
                                  capture_output=True, text=True, check=True)
            rows.append({"hidden": hidden, "response_length": length, "record": done.stdout.strip().splitlines()[-1]})
            print(rows[-1], flush=True)
    with (args.out / "grid.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
