"""rlbench's own presence, measured: the same launch with rlbench around it and bare, in interleaved pairs.

"With" is `rlbench run` as a user runs it: the runner polling the framework's log, the telemetry sampler at its
default rate, the record written at the end. "Without" is the identical launch (the adapter's own plan: the
same argv, environment and config files, written by the same code) started by this script with nothing
around it but `subprocess.run`. Each side's figure is the framework's own median post-warm-up step time, the
timer both sides have. Pairs alternate which side goes first, so drift in the machine's load hits both alike.

    python benchmarks/rlbench_overhead.py --framework trl --pairs 6 --steps 8
    python benchmarks/rlbench_overhead.py --framework openrlhf --pairs 6 --steps 6   # in the lane's venv

It prints each pair, then the median of the per-pair ratios (with / without) with its range, the sign test's
count (pairs where rlbench's side was slower), and the CPU rlbench itself used as the records state it
(`overhead.cpu_share_of_run`). A ratio within the pairs' spread of 1 is "no measurable cost at this n",
which the output says rather than a figure below the noise.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rlbench.harness.record.read import read_record


def with_rlbench(out: Path, framework: str, workload: str, steps: int) -> tuple[float, float | None]:
    """(median post-warm-up step_time_s, rlbench's CPU share of the run) of one `rlbench run`."""
    argv = [sys.executable, "-m", "rlbench.harness", "run", "--framework", framework, "--workload", workload]
    done = subprocess.run([*argv, "--steps", str(steps), "--out", str(out)], capture_output=True, text=True, check=True)
    record = read_record(done.stdout.strip().splitlines()[-1])
    return record["summary"]["step_time_s"]["median"], (record.get("overhead") or {}).get("cpu_share_of_run")


def bare(out: Path, framework: str, workload: str, steps: int) -> float:
    """The median post-warm-up step_time_s of the same launch with nothing of rlbench around it."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.run import profiling
    from rlbench.harness.spec.inputs import prepare_inputs
    from rlbench.harness.spec.runspec import build_run_spec
    from rlbench.workloads.prompts import write_prompts

    spec = build_run_spec(framework, workload, (), steps=steps, seed=0, out=out)
    adapter = get_adapter(framework)
    inputs = prepare_inputs(spec.workload, spec.seed)
    run_dir = Path(tempfile.mkdtemp(prefix="bare-", dir=out))
    plan = adapter.plan(spec, inputs, run_dir)
    write_prompts(inputs.prompts, run_dir / "prompts.jsonl")
    for name, content in plan.files.items():
        (run_dir / name).write_text(content)
    env = {**os.environ, **plan.env, **profiling.framework_env(run_dir)}
    with (run_dir / "framework.log").open("wb") as log:
        subprocess.run(plan.argv, env=env, cwd=run_dir, stdout=log, stderr=subprocess.STDOUT, check=True)
    frame = adapter.read_steps(run_dir)
    return float(frame[frame["step"] > spec.workload.warmup_steps]["step_time_s"].median())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="trl")
    parser.add_argument("--workload", default="gsm8k-grpo-tiny")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    ratios, shares = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            sides = {}
            for side in ("with", "without") if pair % 2 == 0 else ("without", "with"):
                if side == "with":
                    sides[side], share = with_rlbench(Path(tmp), args.framework, args.workload, args.steps)
                    shares.append(share)
                else:
                    sides[side] = bare(Path(tmp), args.framework, args.workload, args.steps)
            ratios.append(sides["with"] / sides["without"])
            share = shares[-1] if shares[-1] is not None else math.nan
            print(
                f"pair {pair + 1}: with rlbench {sides['with']:.4f} s, without {sides['without']:.4f} s, "
                f"ratio {ratios[-1]:.4f} (rlbench's CPU share {share:.2%})",
                flush=True,
            )
    slower = sum(r > 1 for r in ratios)
    median = statistics.median(ratios)
    known = [s for s in shares if s is not None]
    own_cpu = (
        f"rlbench's own CPU {statistics.median(known):.2%} of the run's (median over the records)"
        if known
        else "no CPU share recorded"
    )
    print(
        f"{args.framework} on {args.workload}, {args.pairs} interleaved pairs of {args.steps} steps: median ratio "
        f"with / without {median:.4f} (range {min(ratios):.4f}-{max(ratios):.4f}); rlbench's side slower in "
        f"{slower} of {len(ratios)} pairs; {own_cpu}"
    )
    if min(ratios) <= 1 <= max(ratios):
        print("the pairs' range includes 1: no cost measurable at this n beyond the pairs' spread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
