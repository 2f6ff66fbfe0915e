"""Quality against cost: the target metric's moving mean against training seconds and tokens, every run of a
workload with a quality target on one plot, and a table of time to target per configuration over its seeds.

The curve is what the target is judged on (record.time_to_target: the mean over the target's window of
steps), drawn against the seconds since the run's first step began and the tokens its steps processed, one
colour per framework and one line per run (seed), with the target as a dashed line and a ring where a run
reached it. The table scores each configuration's runs the MLPerf way (record.olympic).

    from rlbench.reports.quality import quality_rows, quality_view
    quality_view(runs).svg; headers, rows = quality_rows(runs)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from rlbench.harness.record.spread import target_spread
from rlbench.harness.record.time_to_target import moving_mean
from rlbench.harness.spec.parallel import Parallelism, knob_label
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
    steps = run.steps.sort_values("step")
    if target["metric"] == "eval_accuracy":  # the evaluations alone: the window counts evaluations, not steps
        steps = steps[steps["eval_accuracy"].notna()] if "eval_accuracy" in steps else steps.iloc[:0]
    out = pd.DataFrame({"step": steps["step"]})
    out["quality"] = moving_mean(steps[target["metric"]].astype(float), int(target["window"])).to_numpy()
    if "step_end_unix_s" in steps and steps["step_end_unix_s"].notna().any():
        origin = steps["step_start_unix_s"].dropna().iloc[0] if "step_start_unix_s" in steps else None
        out["seconds"] = (steps["step_end_unix_s"] - origin).to_numpy() if origin is not None else None
    else:
        out["seconds"] = steps["wall_step_time_s"].cumsum().to_numpy() if "wall_step_time_s" in steps else None
    out["tokens"] = steps["total_tokens"].cumsum().to_numpy() if "total_tokens" in steps else None
    return out


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


def quality_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """Time to target per configuration (framework, workload, layout) over its runs."""
    groups: dict[tuple, list[dict]] = {}
    for run in _with_target(runs):
        record = run.record
        defaults = Parallelism().to_dict()  # a record states every knob: the label names those set away from default
        knobs = {k: v for k, v in (record.get("parallel") or {}).items() if defaults.get(k) != v}
        key = (record["framework"]["name"], record["workload"]["name"], knob_label(knobs))
        groups.setdefault(key, []).append(record["target"])
    rows = []
    for (framework, workload, layout), targets in groups.items():
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
