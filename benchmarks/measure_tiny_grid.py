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

import yaml

from rlbench.workloads.catalog import WORKLOAD_DIR


def grid_workload(folder: Path, hidden: int, length: int, steps: int) -> Path:
    name = f"tiny-h{hidden}-r{length}"
    mapping = {
        "include": [str(WORKLOAD_DIR / "gsm8k-grpo-tiny.yaml")],
        "name": name,
        "max_response_length": length,
        "steps": steps,
        # head_dim stays 64, as the tiny workloads fix it; the FFN keeps Qwen's ~2.7x ratio.
        "model": {"tiny": {"hidden_size": hidden, "num_heads": hidden // 64, "num_kv_heads": max(hidden // 128, 1),
                           "intermediate_size": int(hidden * 2.6875)}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(mapping))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lengths", default="16,32,64")
    parser.add_argument("--widths", default="128,256,512")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for hidden in map(int, args.widths.split(",")):
        for length in map(int, args.lengths.split(",")):
            workload = grid_workload(args.out, hidden, length, args.steps)
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
