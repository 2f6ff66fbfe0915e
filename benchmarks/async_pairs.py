"""Strategy pairs on the CPU lanes: each framework's asynchronous and disaggregated strategies against its own
colocated synchronous run, measured vs the model's predicted speed-up.

Runs `rlbench run` of the tail workload (gsm8k-grpo-tiny-tail: responses end at EOS, a declared geometric tail)
for every strategy a framework offers on its lane, interleaved (one run of each strategy per round, frameworks
alternating), and compares each strategy with the same framework's colocated synchronous run of the same round:

* measured speed-up: median post-warm-up wall step time of the baseline / of the strategy, with a 95% bootstrap
  interval over the two runs' steps (n steps each); "beyond noise" where the interval excludes 1;
* predicted speed-up: the ratio of the two runs' own prediction.json step estimates without the weight sync (the
  model priced with each run's measured lengths, on this machine's CPU row: one device colocated, two for a
  rollout pool of its own, whose loopback transfer the row has no bandwidth for: `predicted_step`);
* whether the model names the faster side, judged only where the measured difference is beyond noise.

Not a timed test: a benchmark. Each run takes 2-3 minutes on a 2-core machine.

    python benchmarks/async_pairs.py --env verl=.nox/verl_cpu,openrlhf=.nox/openrlhf_cpu --out /tmp/pairs
    python benchmarks/async_pairs.py ... --rounds 2 --steps 8 --markdown pairs.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

WORKLOAD = "gsm8k-grpo-tiny-tail"
BASELINE = "colocated sync"
# strategy -> --parallel knobs, per framework: what each offers on its lane (verl separates rollout GPUs only in
# its asynchronous trainers, so it has no disaggregated synchronous run).
STRATEGIES: dict[str, dict[str, tuple[str, ...]]] = {
    "verl": {
        BASELINE: (),
        "one-step-off": ("placement=disaggregated", "async=one-step"),
        "fully-async + partial rollout": ("placement=disaggregated", "async=fully", "partial_rollout=on"),
    },
    "openrlhf": {
        BASELINE: (),
        "disaggregated sync": ("placement=disaggregated",),
        "one-step-off": ("placement=disaggregated", "async=one-step"),
        "2-step-off": ("placement=disaggregated", "async=2"),
    },
}


def run_one(env: Path, framework: str, knobs: tuple[str, ...], steps: int, out: Path) -> Path | None:
    """One `rlbench run` in the framework's lane; its record folder, or None where it failed."""
    parallel = [arg for knob in knobs for arg in ("--parallel", knob)]
    command = [str(env / "bin" / "rlbench"), "run", "--framework", framework, "--workload", WORKLOAD]
    command += ["--steps", str(steps), "--out", str(out), *parallel]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=os.environ.copy())
    if result.returncode != 0:
        print(f"  failed: {result.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return Path(result.stdout.strip().splitlines()[-1])


def post_warmup_times(run_dir: Path) -> np.ndarray:
    steps = pd.read_parquet(run_dir / "steps.parquet")
    warmup = json.loads((run_dir / "run.json").read_text())["workload"].get("warmup_steps", 1)
    column = "wall_step_time_s" if steps["wall_step_time_s"].notna().all() else "step_time_s"
    return steps.loc[steps["step"] > warmup, column].to_numpy(dtype=float)


def predicted_step(run_dir: Path) -> float | None:
    """The run's own predicted step without the weight sync, from its stage groups' estimates: the CPU row has
    no link bandwidth for the lane's loopback gloo transfer between two processes, so a run with a rollout pool
    of its own gets no sync price; both sides of a pair are then compared without it (the sync measured
    0.1-0.4 s of 2.5-3.5 s steps here). Groups add; with asynchrony generation overlaps the rest."""
    prediction = json.loads((run_dir / "prediction.json").read_text())
    if not prediction.get("available"):
        return None
    groups = prediction.get("group_times_estimate_s") or prediction.get("group_times_s") or {}
    generation, experience, training = (groups.get(k) for k in ("generation", "experience", "training"))
    if None in (generation, experience, training):
        return None
    if (prediction.get("async") or {}).get("depth"):
        return max(generation, experience + training)
    return generation + experience + training


def speed_up(base: np.ndarray, other: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Median(base) / median(other), with a 95% bootstrap interval over both runs' steps."""
    rng = np.random.default_rng(seed)
    draws = [np.median(rng.choice(base, base.size)) / np.median(rng.choice(other, other.size)) for _ in range(2000)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(np.median(base) / np.median(other)), float(low), float(high)


def pair_rows(records: dict[tuple[str, str, int], Path]) -> list[dict[str, Any]]:
    rows = []
    for (framework, strategy, round_), run_dir in sorted(records.items()):
        base_dir = records.get((framework, BASELINE, round_))
        if strategy == BASELINE or base_dir is None:
            continue
        base, other = post_warmup_times(base_dir), post_warmup_times(run_dir)
        measured, low, high = speed_up(base, other)
        predicted_base, predicted_other = predicted_step(base_dir), predicted_step(run_dir)
        predicted = predicted_base / predicted_other if predicted_base and predicted_other else None
        beyond_noise = low > 1 or high < 1
        rows.append(
            {
                "framework": framework,
                "pair": f"{strategy} vs {BASELINE}",
                "round": round_,
                "n_steps": f"{other.size} vs {base.size}",
                "measured": measured,
                "interval": (low, high),
                "beyond_noise": beyond_noise,
                "predicted": predicted,
                "winner_right": None if not beyond_noise or predicted is None else (measured > 1) == (predicted > 1),
                "error": None if predicted is None else predicted / measured - 1,
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| framework | pair | round | steps (n) | measured speed-up (95% interval) | predicted | beyond noise | "
        "model names the faster | predicted / measured - 1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["interval"]
        predicted = "–" if r["predicted"] is None else f"{r['predicted']:.2f}x"
        right = {None: "–", True: "yes", False: "**no**"}[r["winner_right"]]
        error = "–" if r["error"] is None else f"{r['error']:+.0%}"
        lines.append(
            f"| {r['framework']} | {r['pair']} | {r['round']} | {r['n_steps']} | {r['measured']:.2f}x "
            f"({low:.2f}-{high:.2f}) | {predicted} | {'yes' if r['beyond_noise'] else 'no'} | {right} | {error} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="framework=lane virtualenv, comma-separated")
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs' records")
    parser.add_argument("--steps", type=int, default=7, help="steps per run (the first is warm-up)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every strategy")
    parser.add_argument("--frameworks", default="verl,openrlhf")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    envs = {k: Path(v) for k, v in (item.split("=", 1) for item in args.env.split(","))}
    frameworks = args.frameworks.split(",")
    records: dict[tuple[str, str, int], Path] = {}
    for round_ in range(1, args.rounds + 1):
        # Interleaved: a round runs every strategy once, the frameworks alternating, so slow drift of the host
        # lands on every strategy alike.
        order = [
            (f, s)
            for i in range(max(len(STRATEGIES[f]) for f in frameworks))
            for f in frameworks
            for s in list(STRATEGIES[f])[i : i + 1]
        ]
        for framework, strategy in order:
            print(f"round {round_}: {framework} {strategy}", file=sys.stderr, flush=True)
            run_dir = run_one(envs[framework], framework, STRATEGIES[framework][strategy], args.steps, args.out)
            if run_dir is not None:
                records[(framework, strategy, round_)] = run_dir
    rows = pair_rows(records)
    table = markdown(rows)
    print(table)
    judged = [r for r in rows if r["winner_right"] is not None]
    errors = [abs(r["error"]) for r in rows if r["error"] is not None]
    print(
        f"model names the faster side in {sum(r['winner_right'] for r in judged)} of {len(judged)} pairs whose "
        f"measured difference is beyond noise ({len(rows)} pairs in all); median |predicted/measured - 1| = "
        + (f"{np.median(errors):.0%} (n={len(errors)})" if errors else "– (no predictions)")
    )
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "records": {"/".join(map(str, k)): str(v) for k, v in records.items()}}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
