"""Quality against cost: the target metric's moving mean against training seconds and tokens, every run of a
workload with a quality target on one plot, and a table of time to target per configuration over its seeds.

The curve is what the target is judged on (record.time_to_target: the mean over the target's window of
steps), drawn against the seconds since the run's first step began and the tokens its steps processed, one
colour per framework and one line per run (seed), with the target as a dashed line and a ring where a run
reached it. The table scores each configuration's runs the MLPerf way (record.olympic); a second table judges
each pair of configurations on time to target (record.target_compare).

    from rlbench.reports.quality import quality_rows, quality_verdicts, quality_view
    quality_view(runs).svg; headers, rows = quality_rows(runs); headers, rows = quality_verdicts(runs)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from rlbench.harness.record.spread import target_spread
from rlbench.harness.record.target_compare import pairwise
from rlbench.harness.record.time_to_target import metric_curve, training_seconds
from rlbench.harness.spec.parallel import knob_label, knob_pairs, parse_parallel
from rlbench.reports.load import RunView
from rlbench.reports.svg import Tips, View

TITLE = "Quality against time and tokens"
HEADERS = [
    "configuration",
    "target",
    "runs reached",
    "olympic score (s) ↓",
    "median (s) ↓",
    "range (s)",
    "steps to target",
    "notes",
]


def _with_target(runs: list[RunView]) -> list[RunView]:
    return [run for run in runs if isinstance(run.record.get("target"), dict) and run.steps is not None]


def _curve(run: RunView) -> pd.DataFrame:
    """step, moving mean of the target metric, seconds since the first step began, cumulative tokens."""
    target = run.record["target"]
    steps = run.steps.sort_values("step").reset_index(drop=True)
    out = pd.DataFrame({"step": steps["step"]})
    out["seconds"] = training_seconds(steps)  # time to target's own rule, so a ring sits where the record says
    out["tokens"] = steps["total_tokens"].cumsum() if "total_tokens" in steps else None
    if target["metric"] not in steps:
        return out.assign(quality=float("nan"))
    # the steps that logged the metric (the evaluations, for eval_accuracy); seconds and tokens count every step
    quality = metric_curve(steps, target["metric"], int(target["window"]))
    return out.loc[quality.index].assign(quality=quality)


def quality_view(runs: list[RunView]) -> View:
    """Two panels (against seconds, against tokens), or why there is nothing to draw."""
    drawable = _with_target(runs)
    if not drawable:
        return View.skipped(TITLE, "Not drawn: no run's workload has a quality target.")
    frameworks = sorted({run.record["framework"]["name"] for run in drawable})
    colors = dict(zip(frameworks, sns.color_palette("tab10", len(frameworks))))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True, layout="constrained")
    tips, notes = Tips("quality"), []
    for run in drawable:
        curve, target = _curve(run), run.record["target"]
        color = colors[run.record["framework"]["name"]]
        for ax, x in zip(axes, ("seconds", "tokens")):
            if curve[x].isna().all():
                notes.append(f"{run.label}: no {x} per step")
                continue
            (line,) = ax.plot(curve[x], curve["quality"], color=color, lw=1.1, alpha=0.85)
            tips.tip(line, f"{run.label} (seed {run.record.get('seed')})")
            if target.get("reached"):
                hit = curve[curve["step"] == target["step"]]
                (ring,) = ax.plot(hit[x], hit["quality"], marker="o", ms=7, mfc="none", mec=color, ls="none")
                tips.tip(ring, f"{run.label}: reached at step {target['step']}, {target.get('seconds', 0):.4g} s")
    values = {(r.record["target"]["metric"], r.record["target"]["value"]) for r in drawable}
    for ax in axes:
        for value in {value for _, value in values}:
            ax.axhline(value, color="#444", ls="--", lw=0.9)
    metric, value = sorted(values)[0]
    window = drawable[0].record["target"]["window"]
    axes[0].set_ylabel(f"{metric}, mean of the last {window} steps\n(higher is better)", fontsize=7)
    axes[0].set_xlabel("training seconds since the first step began", fontsize=7)
    axes[1].set_xlabel("tokens processed (prompt + response)", fontsize=7)
    for framework, color in colors.items():
        axes[0].plot([], [], color=color, label=framework)
    axes[0].legend(fontsize=7, frameon=False, loc="upper left")
    caption = (
        f"One line per run (seed), one colour per framework; the dashed line is the target ({metric} >= {value:g} "
        f"as a mean over {window} steps), a ring marks where a run reached it. Hover a line for its run."
    )
    if len(values) > 1:
        notes.append("the runs' targets differ: each is drawn as a dashed line")
    return View.drawn(TITLE, caption, tips.svg(fig), notes)


def _configurations(runs: list[RunView]) -> dict[tuple[str, str, str], list[dict]]:
    """Each configuration (framework, workload, the knobs set away from default) with its runs' targets."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for run in _with_target(runs):
        record = run.record
        knobs = parse_parallel(knob_pairs(record.get("parallel") or {})).non_default()
        key = (record["framework"]["name"], record["workload"]["name"], knob_label(knobs))
        groups.setdefault(key, []).append(record["target"])
    return groups


def quality_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """Time to target per configuration (framework, workload, layout) over its runs."""
    rows = []
    for (framework, workload, layout), targets in _configurations(runs).items():
        spread = target_spread(targets)
        steps = sorted(s for s in spread["steps_per_run"] if s is not None)
        rows.append(
            [
                f"{framework} {workload} {layout}",
                f"{spread['metric']} >= {spread['value']:g}",
                f"{spread['reached']}/{spread['n']}",
                "–" if spread["score"] is None else f"{spread['score']:.4g} ± {spread['std']:.2g}",
                "–" if spread["median"] is None else f"{spread['median']:.4g}",
                "–" if spread.get("min") is None else f"{spread['min']:.4g}-{spread['max']:.4g}",
                ", ".join(map(str, steps)) or "–",
                "; ".join(spread["notes"]) or "",
            ]
        )
    return HEADERS, rows


VERDICT_HEADERS = ["configuration", "against", "median ratio", "n / reached", "p", "verdict"]


def quality_verdicts(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """Every pair of configurations on one workload and target: the later one's time to target against the
    earlier one's (record.target_compare's rank test, with what bounds it at small n)."""
    configurations = [
        (f"{framework} {workload} {layout}", workload, target_spread(targets))
        for (framework, workload, layout), targets in _configurations(runs).items()
    ]
    rows = []
    for pair in pairwise(configurations):
        if pair["verdict"] is None:
            continue  # another workload or target: nothing to compare
        rows.append(
            [
                pair["cand"],
                pair["base"],
                "–" if pair["ratio"] is None else f"x{pair['ratio']:.3g}",
                f"{pair['n_cand']}/{pair['n_base']} runs, reached {pair['reached_cand']}/{pair['reached_base']}",
                "–" if pair.get("p_value") is None else f"{pair['p_value']:.2g}",
                pair["verdict"] + (f": {pair['why']}" if pair.get("why") else ""),
            ]
        )
    return VERDICT_HEADERS, rows
