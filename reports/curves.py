"""Per-step curves overlaid across runs: step time, throughput and reward against the step number.

One panel per metric, one line per run, every step drawn (steps.parquet), the warm-up
steps hollow and shaded: the summaries leave them out, and this is where a reader
sees why (a first step 10x slower than the rest, a throughput still climbing) and
whether the post-warm-up steps are steady enough to compare.

    from rlbench.reports.curves import curves_view
    curves_view(runs).svg
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import seaborn as sns

from rlbench.harness.record.schema import STEP_METRICS
from rlbench.reports.load import RunView
from rlbench.reports.svg import Tips, View

TITLE = "Per-step curves"
METRICS = ("wall_step_time_s", "tokens_per_s", "reward_mean")  # the one step-time definition for every framework
MAX_RUNS = 12  # distinct colours a reader can still match to the legend


def _has(run: RunView, metric: str) -> bool:
    return run.steps is not None and metric in run.steps and run.steps[metric].notna().any()


def _label(metric: str) -> str:
    m = STEP_METRICS[metric]
    arrow = {"higher": ", higher is better", "lower": ", lower is better"}.get(m.direction, "")
    return f"{metric} ({m.unit}{arrow})"


def curves_view(runs: list[RunView]) -> View:
    """The three panels over every run with steps (at most MAX_RUNS), or why there are none."""
    notes = [f"{run.label}: no steps.parquet" for run in runs if run.steps is None or run.steps.empty]
    drawable = [run for run in runs if run.steps is not None and not run.steps.empty]
    metrics = [m for m in METRICS if any(_has(run, m) for run in drawable)]
    if not metrics:
        return View.skipped(
            TITLE,
            "Not drawn: no run logged a step time, throughput or reward per step"
            + (f" ({'; '.join(notes)})" if notes else "")
            + ".",
        )
    if len(drawable) > MAX_RUNS:
        notes += [
            f"{run.label}: left out (at most {MAX_RUNS} runs are overlaid; report fewer records to see it)"
            for run in drawable[MAX_RUNS:]
        ]
        drawable = drawable[:MAX_RUNS]
    notes += [f"{run.label}: no {m} per step" for m in metrics for run in drawable if not _has(run, m)]
    colors = dict(
        zip(
            (run.label for run in drawable),
            sns.color_palette("tab10" if len(drawable) <= 10 else "tab20", len(drawable)),
        )
    )
    fig, axes = plt.subplots(
        len(metrics), 1, figsize=(10, 2.4 * len(metrics) + 0.8), sharex=True, squeeze=False, layout="constrained"
    )
    tips = Tips("curves")
    warmup = max(run.record["workload"].get("warmup_steps", 0) for run in drawable)
    for ax, metric in zip(axes[:, 0], metrics):
        if warmup:
            ax.axvspan(0.5, warmup + 0.5, color="#f2e6c9", alpha=0.6, lw=0, zorder=0)
            ax.text(
                0.6,
                1.0,
                "warm-up (left out of summaries)",
                transform=ax.get_xaxis_transform(),
                fontsize=6,
                va="top",
                color="#8a6d3b",
            )
        for run in drawable:
            if not _has(run, metric):
                continue
            steps = run.steps.sort_values("step")
            color, run_warmup = colors[run.label], run.record["workload"].get("warmup_steps", 0)
            ax.plot(steps["step"], steps[metric], color=color, lw=1.2, label=run.label)
            for step, value in zip(steps["step"], steps[metric]):
                if value is None or not math.isfinite(value):
                    continue
                warm = step <= run_warmup
                (dot,) = ax.plot(step, value, marker="o", ms=4.5, ls="none", mec=color, mfc="white" if warm else color)
                tips.tip(
                    dot,
                    f"{run.label}\nstep {int(step)}{' (warm-up)' if warm else ''}: {metric} = "
                    f"{value:.4g} {STEP_METRICS[metric].unit}",
                )
        values = [v for run in drawable if _has(run, metric) for v in run.steps[metric] if v > 0 and math.isfinite(v)]
        if values and max(values) / min(values) > 20:  # runs 10x apart: a linear axis flattens the faster ones
            ax.set_yscale("log")
        ax.set_ylabel(
            _label(metric).replace(" (", "\n(") + ("\nlog scale" if ax.get_yscale() == "log" else ""), fontsize=7
        )
    axes[-1][0].set_xlabel("RL step")
    axes[-1][0].xaxis.get_major_locator().set_params(integer=True)
    axes[0][0].legend(fontsize=6, loc="lower left", bbox_to_anchor=(0, 1.02), ncol=2, frameon=False)
    caption = (
        "Every step of every run (steps.parquet), one colour per run; hollow markers and the shaded band are "
        "warm-up steps, which every summary leaves out. Step time is the framework's own; throughput is the "
        "step's prompt + response tokens over it; reward is the mean over the step's responses. Hover a "
        "marker for its value."
    )
    return View.drawn(TITLE, caption, tips.svg(fig), notes)
