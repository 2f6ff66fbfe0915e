"""Measured vs predicted as a log-log scatter: every run's stages and whole step against y = x.

Each point is one (run, stage): x the model's prediction from the run's prediction.json,
y the measured median over post-warm-up steps (the record's summary). The model gives
two predictions and they mean different things, so they are drawn differently:
- the bound (hollow): Brent's lower bound, what the hardware allows; a point below
  y = x beat the bound, which says the model is wrong, not that the run was fast;
- the estimate (filled): the bound plus the overheads no datasheet states
  (`rlbench.harness.perfmodel.overheads`); distance from y = x is the model's error.
Where a measured stage is several model stages (gen = prefill + decode) their
predictions are summed (`rlbench.harness.predict.run_prediction.STAGE_MAP`).

    from rlbench.reports.scatter import prediction_points
    prediction_points(run)     # [{"stage", "kind", "predicted_s", "measured_s"}]
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns

from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.reports.load import RunView
from rlbench.reports.svg import Tips, View

TITLE = "Measured vs predicted, log-log"
KINDS = {"bound": "step_time_bound_s", "estimate": "step_time_estimate_s"}  # prediction.json key of the whole step


def _median(run: RunView, metric: str) -> float | None:
    value = ((run.record.get("summary") or {}).get(metric) or {}).get("median")
    return value if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def _stage_prediction(stages: dict[str, dict[str, Any]], names: tuple[str, ...], kind: str) -> float | None:
    values = [stages[n].get(f"{kind}_s") for n in names if n in stages]
    if not values or any(not isinstance(v, (int, float)) for v in values):
        return None  # an older prediction.json without this kind, or a stage the model does not time
    return sum(values) or None


def prediction_points(run: RunView) -> list[dict[str, Any]]:
    """(stage, kind, predicted_s, measured_s) for each measured stage and the whole step with a prediction."""
    prediction = run.prediction or {}
    if not prediction.get("available"):
        return []
    stages = {s.get("name"): s for s in prediction.get("stages") or [] if isinstance(s, dict)}
    points = []
    for column, names in STAGE_MAP.items():
        measured = _median(run, f"time_{column}_s")
        for kind in KINDS:
            predicted = _stage_prediction(stages, names, kind)
            if measured and predicted:
                points.append({"stage": column, "kind": kind, "predicted_s": predicted, "measured_s": measured})
    measured = _median(run, "step_time_s")
    for kind, key in KINDS.items():
        predicted = prediction.get(key)
        if measured and isinstance(predicted, (int, float)) and predicted > 0:
            points.append({"stage": "whole step", "kind": kind, "predicted_s": predicted, "measured_s": measured})
    return points


def prediction_problem(run: RunView) -> str | None:
    """Why a run has no usable prediction (no prediction.json, or the model could not predict it); None if it has."""
    prediction = run.prediction
    if prediction is None:
        return "no prediction.json"
    if not prediction.get("available"):
        return f"no prediction ({prediction.get('reason', 'reason not recorded')})"
    return None


def _reason(run: RunView) -> str:
    return prediction_problem(run) or "no stage with both a measured median and a bound or estimate"


def vs_model_scatter(runs: list[RunView]) -> View:
    """The scatter, or why there is none; runs without a prediction are named in the notes."""
    table, notes = [], []
    for run in runs:
        points = prediction_points(run)
        if not points:
            notes.append(f"{run.label}: {_reason(run)}")
        table += [{**p, "run": run.label} for p in points]
    if not table:
        return View.skipped(TITLE, f"Not drawn: no run has a measured stage with a prediction ({'; '.join(notes)}).")
    stages = list(dict.fromkeys(p["stage"] for p in table))
    palette = dict(zip(stages, sns.color_palette("tab10", len(stages))))
    run_names = list(dict.fromkeys(p["run"] for p in table))
    shapes = dict(zip(run_names, "osD^vP*Xh<>p" * (len(run_names) // 12 + 1)))
    fig, ax = plt.subplots(figsize=(8.5, 6.2))
    tips = Tips("scatter")
    for p in table:
        color = palette[p["stage"]]
        estimate = p["kind"] == "estimate"  # smaller and on top: a bound at the same spot stays visible around it
        (marker,) = ax.plot(
            p["predicted_s"],
            p["measured_s"],
            marker=shapes[p["run"]],
            ms=6 if estimate else 11,
            ls="none",
            mfc=color if estimate else "none",
            mec=color,
            mew=1.6,
            zorder=3 if estimate else 2,
        )
        ratio = p["measured_s"] / p["predicted_s"]
        tips.tip(
            marker,
            f"{p['run']}\n{p['stage']}: measured {p['measured_s']:.3g} s, {p['kind']} "
            f"{p['predicted_s']:.3g} s, measured / {p['kind']} = {ratio:.3g}",
        )
    values = [v for p in table for v in (p["predicted_s"], p["measured_s"])]
    lo, hi = min(values) / 2, max(values) * 2
    ax.plot([lo, hi], [lo, hi], color="#333333", lw=1, ls="--")
    ax.fill_between([lo, hi], [lo, lo], [lo, hi], color="#c44e52", alpha=0.06, lw=0)
    ax.text(
        hi / 1.3,
        lo * 1.3,
        "below y = x: faster than the model allows\n(for a bound: the model is wrong)",
        ha="right",
        va="bottom",
        fontsize=7,
        color="#c44e52",
    )
    for factor in (10, 100):  # guide lines: how far off the model is, read without hovering
        if hi / factor > lo * 1.5:  # only where the line crosses the box
            ax.plot([lo, hi / factor], [lo * factor, hi], color="#999999", lw=0.6, ls=":")
            ax.text(
                hi / factor * 1.08, hi / 1.15, f"{factor}× slower", fontsize=7, color="#777777", ha="left", va="top"
            )
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
    ax.set_aspect("equal")
    ax.set_xlabel("predicted time per step (s, work-depth model, prediction.json)")
    ax.set_ylabel("measured median time per step (s, lower is better)")
    from matplotlib.lines import Line2D

    legend = [
        Line2D([], [], ls="none", marker="o", mfc="none", mec="#555555", label="bound (lower bound)"),
        Line2D([], [], ls="none", marker="o", mfc="#555555", mec="#555555", label="estimate"),
        Line2D([], [], color="#333333", ls="--", label="y = x"),
        *[Line2D([], [], ls="none", marker="s", color=palette[s], label=s) for s in stages],
        *[Line2D([], [], ls="none", marker=shapes[r], mfc="none", mec="#333333", label=r) for r in run_names],
    ]
    ax.legend(handles=legend, fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    caption = (
        "Each marker is one run's stage (colour) or whole step: x the model's prediction for the run's exact "
        "configuration, y the measured median over post-warm-up steps. Hollow: the bound (Brent's lower bound, "
        "what the hardware allows: a point below the dashed y = x line means the model is wrong). Filled: the "
        "estimate (the bound plus overheads no datasheet states). Dotted lines: 10× and 100× slower than "
        "predicted. Marker shape: run. Hover a marker for its values and ratio."
    )
    return View.drawn(TITLE, caption, tips.svg(fig), notes)
