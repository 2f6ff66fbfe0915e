"""Predict every published run of benchmarks/published_runs.yaml and print predicted vs measured.

For each run: the step and every stage group the source published (gen, train), measured, the
roofline bound and the estimate (bound plus the overhead terms of perfmodel/overheads.py), and
measured / predicted for both. Runs in the YAML's `training_subset` (the fitted terms of
perfmodel/overheads.py, FITTED, are fitted on them) are marked and left out of the error summary,
which covers the validation runs only.

    python benchmarks/validate_published.py                      # the table
    python benchmarks/validate_published.py --json out.json      # and the rows, machine-readable
    python benchmarks/validate_published.py --fit                # fit FITTED on the training subset

Besides each run's error, every pair of runs that differs in one strategy or scale is judged as a user
choosing between them would judge it: the measured speed-up of one over the other, the estimate's, and
whether the estimate picks the faster side (`pairs`). A pair is two runs of one framework release, model,
hardware and batch (prompts, group, cap, mini-batches) that differ either in asynchrony (the async side
may also split the GPUs and re-lay its trainer, as its recipe does) or in the GPU count, not both; the
measured lengths (prompt, mean response) may differ. Pairs with a fitted run are left out of the summary.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from rlbench.harness.perfmodel import (
    FITTED,
    NO_FITTED_TERMS,
    FittedTerms,
    ModelArch,
    ParallelShape,
    Prediction,
    WorkloadShape,
    engine_steps,
    engine_tokens,
    get_arch,
    get_hardware,
    load_hf_config,
    predict,
)

DEFAULT = Path(__file__).with_name("published_runs.yaml")
# A published stage column -> the model's stages (perfmodel/predict.py STAGES) it covers. A run whose
# framework times a stage elsewhere says so in its own `measured_stages` (e.g. an early verl that
# recomputes old log-probs inside its gen timer).
MEASURED_STAGES = {
    "gen_s": ("generation_prefill", "generation_decode"),
    "logprob_s": ("ref_logprob", "old_logprob"),
    "old_log_prob_s": ("old_logprob",),
    "ref_s": ("ref_logprob",),
    "values_s": ("critic_values",),
    "experience_s": ("reward", "ref_logprob", "old_logprob", "critic_values", "advantage"),
    "train_s": ("actor_update", "critic_update"),
    "update_actor_s": ("actor_update",),
    "update_critic_s": ("critic_update",),
    "refit_s": ("weight_sync",),
}


# Issue 18's targets for runs not used for fitting: |estimate / measured - 1| at most this.
TARGETS = {"step": 0.30, "gen": 0.50}
# Issue 37's targets for pairs not fitted on: the winner right in this share, the median speed-up error below.
PAIR_TARGETS = {"winner": 0.90, "speed_up": 0.25}
# Workload fields a run measured rather than chose: a pair may differ in them.
MEASURED_WORKLOAD = ("prompt_len", "mean_response_len", "derived")


def load_runs(path: Path = DEFAULT) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise ValueError(f"{path}: expected a mapping with a non-empty 'runs' list")
    return data


def _arch(model: str) -> ModelArch:
    return load_hf_config(model) if model.endswith(".json") else get_arch(model)


def _async_mode(value: str) -> str:
    """off | one-step | K-step (K policy versions of staleness: the model's k-step mode)."""
    return "k-step" if value.endswith("-step") and value != "one-step" else value


def _staleness(value: str) -> int:
    return int(value.removesuffix("-step")) if _async_mode(value) == "k-step" else 1


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
        padded_prompt_len=train.get("padded_prompt_len"),
        trainer_padded_prompt_len=train.get("trainer_padded_prompt_len"),
        critic_padded_prompt_len=train.get("critic_padded_prompt_len"),
        micro_batch_size=train.get("micro_batch_size", 1),
        gradient_checkpointing=train.get("gradient_checkpointing", False),
        offload=train.get("offload", False),
        ref_offload=train.get("ref_offload", False),
        engine_mode=rollout.get("engine_mode", "cuda_graphs"),
        engine_max_seqs=rollout.get("max_num_seqs"),
        engine_memory_fraction=rollout.get("memory_fraction"),
    )
    layout = ParallelShape(
        gpus=run["gpus"],
        tp=train.get("tp", 1),
        pp=train.get("pp", 1),
        sp=train.get("sp", 1),
        ep=train.get("ep", 1),
        etp=train.get("etp"),
        sharding=train.get("sharding", "full"),
        rollout_tp=rollout.get("tp", 1),
        placement=run.get("placement", "colocated"),
        rollout_gpus=run.get("rollout_gpus", 0),
        async_mode=_async_mode(run.get("async", "off")),
        async_staleness=_staleness(run.get("async", "off")),
        cp=train.get("cp", 1),
    )
    return work, layout


def _stages(p: Prediction, names: tuple[str, ...] | list[str], estimate: bool) -> float | None:
    by_name = {stage["name"]: stage for stage in p.to_dict()["stages"]}
    values = [by_name[n]["estimate_s" if estimate else "bound_s"] for n in names]
    return None if any(v is None for v in values) else sum(values)


def _measured_stages(run: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(run.get("measured_stages", {}).get(key, MEASURED_STAGES[key]))


# The published columns that time trainer passes alone (stages.trainer_pass), which the per-unit host term prices.
TRAINER_COLUMNS = ("logprob_s", "old_log_prob_s", "ref_s", "values_s", "train_s", "update_actor_s", "update_critic_s")


def fit(runs: list[dict[str, Any]], subset: list[str]) -> FittedTerms:
    """FittedTerms from the training subset alone.
    decode_step_s and decode_token_s (per engine mode): what the subset's runs of that mode measured in generation
    beyond the estimate without the fitted terms, split over the busiest engine's decode steps and tokens by
    least squares with both terms non-negative (_fit_decode); where the mode's runs do not differ in tokens per
    step, the split cannot be told and the mean excess per token is the one term.
    refit_bytes_per_s: the mean over the subset's colocated runs that published the refit of weights per GPU /
    refit seconds.
    trainer_unit_s: the host time t per layer unit that minimises the squared log error of every trainer column
    the subset published, each stage then costing max(its estimate without the term, its depth x t)."""
    decode_rows: dict[str, list[tuple[float, float, float]]] = {}
    refit_rates, trainer_rows = [], []
    for run in (r for r in runs if r["id"] in subset):
        work, layout = shapes(run)
        arch = _arch(run["model"])
        p = predict(arch, work, layout, run["hardware"], fitted=NO_FITTED_TERMS)
        measured = run["measured"]
        if "gen_s" in measured:
            missing = measured["gen_s"] - _stages(p, _measured_stages(run, "gen_s"), True)
            steps = engine_steps(arch, work, layout, get_hardware(run["hardware"]))
            decode_rows.setdefault(work.engine_mode, []).append((steps, engine_tokens(work, layout), missing))
        if "refit_s" in measured and layout.placement == "colocated":
            refit_rates.append(arch.weight_bytes() / layout.rollout_tp / measured["refit_s"])
        by_name = {stage["name"]: stage for stage in p.to_dict()["stages"]}
        for key in (k for k in TRAINER_COLUMNS if k in measured):
            stages = [by_name[n] for n in _measured_stages(run, key)]
            trainer_rows.append(
                (float(measured[key]), [(s["estimate_s"] or 0.0, s["depth"]) for s in stages if s["depth"]])
            )
    unknown = set(subset) - {r["id"] for r in runs}
    if unknown:
        raise ValueError(f"training_subset names runs that are not in the file: {', '.join(sorted(unknown))}")
    decode = {mode: _fit_decode(rows) for mode, rows in sorted(decode_rows.items())}
    return FittedTerms(
        decode_step_s={mode: step for mode, (step, _) in decode.items() if step},
        decode_token_s={mode: token for mode, (_, token) in decode.items() if token},
        refit_bytes_per_s=sum(refit_rates) / len(refit_rates) if refit_rates else float("inf"),
        trainer_unit_s=_fit_unit(trainer_rows),
        fitted_on=tuple(subset),
    )


def _fit_decode(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(s per decode step, s per token) minimising sum(steps a + tokens b - excess)^2 with a, b >= 0 over rows of
    (steps, tokens, excess). With one ratio of tokens to steps (one run, or runs alike) a and b cannot be told
    apart: the mean excess per token, b alone, as the term was before it had a per-step part."""
    rows = [(s, t, max(0.0, e)) for s, t, e in rows]
    ratios = {round(t / s, 6) for s, t, _ in rows}
    if len(ratios) < 2:
        return 0.0, sum(e / t for _, t, e in rows) / len(rows)

    def sse(a: float, b: float) -> float:
        return sum((s * a + t * b - e) ** 2 for s, t, e in rows)

    ss, tt, st = (sum(s * s for s, _, _ in rows), sum(t * t for _, t, _ in rows), sum(s * t for s, t, _ in rows))
    se, te = sum(s * e for s, _, e in rows), sum(t * e for _, t, e in rows)
    det = ss * tt - st * st
    both = ((se * tt - te * st) / det, (te * ss - se * st) / det)
    candidates = [(se / ss, 0.0), (0.0, te / tt)] + ([both] if min(both) >= 0 else [])
    return min(candidates, key=lambda ab: sse(*ab))


def _fit_unit(rows: list[tuple[float, list[tuple[float, float]]]]) -> float:
    """The t in [1 us, 100 ms] (a grid of 1/1000 decade) minimising sum(log(sum max(estimate, depth x t)) -
    log(measured))^2 over the rows; 0 where no row's depth is known or no t improves on t = 0 (no term)."""
    rows = [(m, stages) for m, stages in rows if stages]
    if not rows:
        return 0.0

    def loss(t: float) -> float:
        return sum(math.log(sum(max(e, d * t) for e, d in stages) / m) ** 2 for m, stages in rows)

    best = min((10 ** (k / 1000) for k in range(-6000, -1000 + 1)), key=loss)
    return best if loss(best) < loss(0.0) else 0.0


def compare(run: dict[str, Any], fitted: FittedTerms = FITTED) -> list[dict[str, Any]]:
    """Rows (run, metric, measured, bound, estimate) for one published run."""
    work, layout = shapes(run)
    p = predict(_arch(run["model"]), work, layout, run["hardware"], fitted=fitted)
    rows = []
    for key, measured in run["measured"].items():
        if key == "step_s":
            bound, estimate = p.step_time_bound_s, p.step_time_estimate_s
        elif key in MEASURED_STAGES:
            stages = _measured_stages(run, key)
            bound, estimate = _stages(p, stages, False), _stages(p, stages, True)
        else:
            raise ValueError(f"{run['id']}: measured key {key!r} must be step_s or one of {', '.join(MEASURED_STAGES)}")
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


def _batch(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run["workload"].items() if k not in MEASURED_WORKLOAD}


def pair_axis(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """'async' or 'scale' where two runs differ in that alone (as the module docstring defines it), else None."""
    same = all(a.get(k) == b.get(k) for k in ("framework", "model", "hardware")) and _batch(a) == _batch(b)
    if not same:
        return None
    if a.get("async", "off") != b.get("async", "off") and a["gpus"] == b["gpus"]:
        return "async"
    if a["gpus"] != b["gpus"] and a.get("async", "off") == b.get("async", "off"):
        return "scale"
    return None


def pairs(runs: list[dict[str, Any]], fitted: set[str], fitted_terms: FittedTerms = FITTED) -> list[dict[str, Any]]:
    """One row per pair: the slower-to-be side first (synchronous, or fewer GPUs), its measured and estimated
    speed-up of the second over the first, and whether the estimate names the faster side."""
    estimates: dict[str, float | None] = {}
    for run in runs:
        try:
            work, layout = shapes(run)
            estimates[run["id"]] = predict(
                _arch(run["model"]), work, layout, run["hardware"], fitted=fitted_terms
            ).step_time_estimate_s
        except ValueError:
            estimates[run["id"]] = None
    rows = []
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            axis = pair_axis(a, b)
            if axis is None or "step_s" not in a["measured"] or "step_s" not in b["measured"]:
                continue
            first, second = (
                (a, b) if (a.get("async", "off") == "off" if axis == "async" else a["gpus"] < b["gpus"]) else (b, a)
            )
            est_first, est_second = estimates[first["id"]], estimates[second["id"]]
            measured = first["measured"]["step_s"] / second["measured"]["step_s"]
            predicted = est_first / est_second if est_first and est_second else None
            rows.append(
                {
                    "axis": axis,
                    "first": first["id"],
                    "second": second["id"],
                    "measured_speed_up": measured,
                    "predicted_speed_up": predicted,
                    "winner_right": None if predicted is None else (measured > 1) == (predicted > 1),
                    "fitted": first["id"] in fitted or second["id"] in fitted,
                }
            )
    return rows


def pair_table(rows: list[dict[str, Any]]) -> str:
    """The pairs, then the summary against PAIR_TARGETS over the pairs not fitted on."""
    lines = [f"{'axis':<6} {'first -> second':<86} {'measured':>8} {'predicted':>9} {'winner':>6}"]
    for r in rows:
        mark = " (fit)" if r["fitted"] else ""
        right = "n/a" if r["winner_right"] is None else "right" if r["winner_right"] else "WRONG"
        lines.append(
            f"{r['axis']:<6} {r['first'] + ' -> ' + r['second'] + mark:<86} {_fmt(r['measured_speed_up']):>8} "
            f"{_fmt(r['predicted_speed_up']):>9} {right:>6}"
        )
    judged = [r for r in rows if not r["fitted"] and r["winner_right"] is not None]
    if judged:
        right = sum(r["winner_right"] for r in judged)
        errors = sorted(abs(r["predicted_speed_up"] / r["measured_speed_up"] - 1) for r in judged)
        median = (
            errors[len(errors) // 2]
            if len(errors) % 2
            else sum(errors[len(errors) // 2 - 1 : len(errors) // 2 + 1]) / 2
        )
        lines += [
            "",
            f"pairs not fitted on: {len(judged)}; winner right in {right} ({right / len(judged):.0%}, target "
            f"{PAIR_TARGETS['winner']:.0%}); median |predicted / measured speed-up - 1| = {median:.0%} (target "
            f"{PAIR_TARGETS['speed_up']:.0%})",
        ]
        for axis in ("async", "scale"):
            some = [r for r in judged if r["axis"] == axis]
            if some:
                lines.append(f"  {axis}: winner right in {sum(r['winner_right'] for r in some)} of {len(some)}")
    return "\n".join(lines)


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
        for metric, target in TARGETS.items():
            judged = [r for r in held_out if r["metric"] == metric]
            within = [r for r in judged if abs(r["estimate_s"] / r["measured_s"] - 1) <= target]
            misses = ", ".join(
                f"{r['run']} {r['estimate_s'] / r['measured_s'] - 1:+.0%}" for r in judged if r not in within
            )
            lines.append(
                f"{metric} within {target:.0%}: {len(within)} of {len(judged)} validation runs"
                + (f" (misses: {misses})" if misses else "")
            )
    return "\n".join(lines)


def markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]], fitted: set[str], summary: str) -> str:
    """docs/measurements/published-runs.md: the summary and one table row per run and metric."""
    by_id = {run["id"]: run for run in runs}
    lines = [
        "# Published runs against the work-depth model's estimate",
        "",
        "Written by `python benchmarks/validate_published.py --markdown docs/measurements/published-runs.md` from",
        "`benchmarks/published_runs.yaml` (each run's source, recipe and configuration are there). The fitted",
        'terms (`overheads.FITTED`) come from the runs marked "fitted on"; every other row is validation.',
        '`docs/perfmodel.md` ("Published runs") says what the set holds and why the misses miss.',
        "",
        "```",
        summary,
        "```",
        "",
        "| run | model | GPUs | metric | measured s | bound s | estimate s | measured / bound | measured / estimate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    previous = None
    for r in rows:
        run, first = by_id[r["run"]], r["run"] != previous
        previous = r["run"]
        gpus = f"{run['gpus']} {run['hardware']}" + (
            f" ({run['rollout_gpus']} rollout)" if run.get("rollout_gpus") else ""
        )
        name = r["run"] + (" (fitted on)" if r["run"] in fitted else "")
        lines.append(
            f"| {name if first else ''} | {run['model'] if first else ''} | {gpus if first else ''} | {r['metric']} | "
            f"{_fmt(r['measured_s'])} | {_fmt(r['bound_s'])} | {_fmt(r['estimate_s'])} | "
            f"{_fmt(r['measured_over_bound'])} | {_fmt(r['measured_over_estimate'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=Path, default=DEFAULT, help="published runs YAML")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--fit", action="store_true", help="print FittedTerms fitted on the training subset")
    parser.add_argument("--markdown", type=Path, help="also write the summary and table as Markdown here")
    args = parser.parse_args(argv)
    data = load_runs(args.runs)
    if args.fit:
        terms = fit(data["runs"], list(data.get("training_subset") or []))
        print(
            f"FittedTerms(decode_step_s={ {m: float(f'{v:.3g}') for m, v in terms.decode_step_s.items()} }, "
            f"decode_token_s={ {m: float(f'{v:.3g}') for m, v in terms.decode_token_s.items()} }, "
            f"refit_bytes_per_s={terms.refit_bytes_per_s:.3g}, "
            f"trainer_unit_s={terms.trainer_unit_s:.3g}, fitted_on={terms.fitted_on})"
        )
        return 0
    fitted = set(data.get("training_subset") or [])
    rows, refused = [], []
    for run in data["runs"]:
        try:
            rows += compare(run)
        except ValueError as exc:  # a layout the model cannot express: named, never dropped silently
            refused.append(f"{run['id']}: {exc}")
    printed = table(rows, fitted)
    pair_rows = pairs(data["runs"], fitted)
    if pair_rows:
        printed += "\n\npairs that differ in one strategy or scale (speed-up of the second over the first):\n"
        printed += pair_table(pair_rows)
    if refused:
        printed += f"\n\nnot predicted ({len(refused)}): the model cannot express the run's layout\n"
        printed += "\n".join(f"  {line}" for line in refused)
    print(printed)
    if args.markdown:
        summary = printed.split("\n\n", 1)[1] if "\n\n" in printed else ""
        args.markdown.write_text(markdown(rows, data["runs"], fitted, summary))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
