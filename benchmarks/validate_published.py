"""Predict every published run of benchmarks/published_runs.yaml and print predicted vs measured.

For each run: the step and every stage group the source published (gen, train), measured, the
roofline bound and the estimate (bound plus the overhead terms of perfmodel/overheads.py), and
measured / predicted for both. Runs in the YAML's `training_subset` (constants fitted on them;
none today) are marked and left out of the error summary, which covers the validation runs only.

    python benchmarks/validate_published.py                      # the table
    python benchmarks/validate_published.py --json out.json      # and the rows, machine-readable
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from rlbench.perfmodel import ParallelShape, Prediction, WorkloadShape, get_arch, load_hf_config, predict
from rlbench.perfmodel.arch import ModelArch

DEFAULT = Path(__file__).with_name("published_runs.yaml")
# A published stage column -> the model's stage groups (perfmodel/predict.py GROUPS) it covers.
MEASURED_GROUPS = {"gen_s": ("generation",), "train_s": ("training",), "experience_s": ("experience",)}


def load_runs(path: Path = DEFAULT) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty 'runs' list")
    return data


def _arch(model: str) -> ModelArch:
    return load_hf_config(model) if model.endswith(".json") else get_arch(model)


def shapes(run: dict[str, Any]) -> tuple[WorkloadShape, ParallelShape]:
    """The model's inputs for one published run, from its YAML entry."""
    w, train, rollout = run["workload"], run["train"], run["rollout"]
    work = WorkloadShape(
        prompts_per_step=w["prompts_per_step"],
        group_size=w["group_size"],
        prompt_len=w["prompt_len"],
        response_len=w["response_len"],
        fixed_length="mean_response_len" not in w,
        mean_response_len=w.get("mean_response_len"),
        mini_batch_prompts=w.get("mini_batch_prompts"),
        use_kl_reference=w.get("kl_reference", True),
        recompute_old_logprob=w.get("recompute_old_logprob", True),
        algorithm=w.get("algorithm", "grpo"),
        micro_batch_tokens=train.get("micro_batch_tokens"),
        micro_batch_size=train.get("micro_batch_size", 1),
        gradient_checkpointing=train.get("gradient_checkpointing", False),
        engine_mode=rollout.get("engine_mode", "cuda_graphs"),
        engine_max_seqs=rollout.get("max_num_seqs"),
        engine_memory_fraction=rollout.get("memory_fraction"),
    )
    layout = ParallelShape(
        gpus=run["gpus"],
        tp=train.get("tp", 1),
        pp=train.get("pp", 1),
        sp=train.get("sp", 1),
        sharding=train.get("sharding", "full"),
        rollout_tp=rollout.get("tp", 1),
        placement=run.get("placement", "colocated"),
        rollout_gpus=run.get("rollout_gpus", 0),
        async_mode=run.get("async", "off"),
    )
    return work, layout


def _groups(p: Prediction, names: tuple[str, ...], estimate: bool) -> float | None:
    table = p.to_dict()["group_times_estimate_s" if estimate else "group_times_s"]
    values = [table[n] for n in names]
    return None if any(v is None for v in values) else sum(values)


def compare(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (run, metric, measured, bound, estimate) for one published run."""
    work, layout = shapes(run)
    p = predict(_arch(run["model"]), work, layout, run["hardware"])
    rows = []
    for key, measured in run["measured"].items():
        if key == "step_s":
            bound, estimate = p.step_time_bound_s, p.step_time_estimate_s
        elif key in MEASURED_GROUPS:
            bound, estimate = _groups(p, MEASURED_GROUPS[key], False), _groups(p, MEASURED_GROUPS[key], True)
        else:
            raise ValueError(f"{run['id']}: measured key {key!r} must be step_s or one of {', '.join(MEASURED_GROUPS)}")
        rows.append(
            {
                "run": run["id"],
                "metric": key.removesuffix("_s"),
                "measured_s": float(measured),
                "bound_s": bound,
                "estimate_s": estimate,
                "measured_over_bound": measured / bound if bound else None,
                "measured_over_estimate": measured / estimate if estimate else None,
                "mfu_bound": p.mfu_bound,
                "mfu_estimate": p.mfu_estimate,
                "memory_fits": p.memory.fits,
            }
        )
    return rows


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def table(rows: list[dict[str, Any]], fitted: set[str]) -> str:
    lines = [
        f"{'run':<40} {'metric':<6} {'measured s':>10} {'bound s':>9} {'estimate s':>10} "
        f"{'meas/bound':>10} {'meas/est':>8}"
    ]
    for r in rows:
        mark = " (fit)" if r["run"] in fitted else ""
        lines.append(
            f"{r['run'] + mark:<40} {r['metric']:<6} {_fmt(r['measured_s']):>10} {_fmt(r['bound_s']):>9} "
            f"{_fmt(r['estimate_s']):>10} {_fmt(r['measured_over_bound']):>10} "
            f"{_fmt(r['measured_over_estimate']):>8}"
        )
    held_out = [r for r in rows if r["run"] not in fitted and r["measured_over_estimate"]]
    if held_out:
        errors = sorted(held_out, key=lambda r: -abs(r["estimate_s"] / r["measured_s"] - 1))
        worst = errors[0]
        mean = sum(abs(r["estimate_s"] / r["measured_s"] - 1) for r in held_out) / len(held_out)
        lines += [
            "",
            f"validation rows: {len(held_out)} (fitted runs left out: {len(fitted)}); "
            f"mean |estimate/measured - 1| = {mean:.0%}; worst: {worst['run']} {worst['metric']} "
            f"{worst['estimate_s'] / worst['measured_s'] - 1:+.0%}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=Path, default=DEFAULT, help="published runs YAML")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    data = load_runs(args.runs)
    fitted = set(data.get("training_subset") or [])
    rows = [row for run in data["runs"] for row in compare(run)]
    print(table(rows, fitted))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
