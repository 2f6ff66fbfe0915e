"""Roofline per stage: arithmetic intensity against FLOP/s per device, under the hardware's roof.

For each measured stage of a run, from the record alone:
- arithmetic intensity = the model's FLOPs / the model's memory bytes for the stage
  (prediction.json: `flops`, `bytes` of the model stages that make up the measured one);
- achieved FLOP/s per device = those FLOPs / (devices x measured median stage time). This is
  the model's FLOP count over a measured time, not a hardware-counter reading;
- the roof: min(peak FLOP/s, bandwidth x intensity). The peak is prediction.json's
  `peak_flops_per_device` (the cited datasheet's dense peak on a GPU, the peak measured by
  rlbench's CPU probe on a CPU); the bandwidth is the one the model priced the stage's
  bytes at, recovered from the record as bytes / (devices x memory_time_s x achievable).
The roof is a bound, and so is the model's own point for the stage (hollow: its FLOPs over
its predicted bound time); neither is an estimate or an MFU.

    from rlbench.reports.roofline import roofline_points
    roofline_points(run)   # {"stages": [...], "peak_flops": ..., "bandwidth": ...} or None
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.reports.load import RunView
from rlbench.reports.scatter import prediction_problem
from rlbench.reports.svg import Tips, View

TITLE = "Roofline per stage"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _bandwidth(stages: list[dict[str, Any]], achievable: float) -> float | None:
    """Bytes/s per device the model priced memory at (roofline.py: memory = bytes / (p x bw x a))."""
    rates = [
        s["bytes"] / (s["gpus"] * s["memory_time_s"] * achievable)
        for s in stages
        if (_number(s.get("bytes")) or 0) > 0
        and (_number(s.get("memory_time_s")) or 0) > 0
        and (_number(s.get("gpus")) or 0) > 0
    ]
    return statistics.median(rates) if rates else None


def roofline_points(run: RunView) -> dict[str, Any] | None:
    """The run's roof and one point per measured stage with FLOPs, bytes and a measured time; None when the
    record lacks any of them (see `missing`)."""
    prediction = run.prediction or {}
    peak, achievable = _number(prediction.get("peak_flops_per_device")), _number(prediction.get("achievable"))
    stages = [s for s in prediction.get("stages") or [] if isinstance(s, dict)]
    bandwidth = _bandwidth(stages, achievable or 1.0) if achievable else None
    if not prediction.get("available") or not peak or not bandwidth:
        return None
    by_name = {s.get("name"): s for s in stages}
    summary = run.record.get("summary") or {}
    points = []
    for column, names in STAGE_MAP.items():
        parts = [by_name[n] for n in names if n in by_name]
        measured = _number((summary.get(f"time_{column}_s") or {}).get("median"))
        flops = sum(_number(p.get("flops")) or 0.0 for p in parts)
        nbytes = sum(_number(p.get("bytes")) or 0.0 for p in parts)
        devices = max((_number(p.get("gpus")) or 0.0 for p in parts), default=0.0)
        bounds = [_number(p.get("bound_s")) for p in parts]
        if not measured or measured <= 0 or flops <= 0 or nbytes <= 0 or devices <= 0:
            continue
        bound = sum(bounds) if bounds and None not in bounds else None  # type: ignore[arg-type]
        points.append(
            {
                "stage": column,
                "intensity": flops / nbytes,
                "achieved": flops / (devices * measured),
                "bound_flops": flops / (devices * bound) if bound else None,
                "measured_s": measured,
                "flops": flops,
                "bytes": nbytes,
                "devices": devices,
                "limit": "memory" if flops / nbytes < peak / bandwidth else "compute",
            }
        )
    if not points:
        return None
    return {"stages": points, "peak_flops": peak, "bandwidth": bandwidth, "hardware": prediction.get("hardware", "?")}


def missing(run: RunView) -> str:
    """Why a run has no roofline points."""
    problem = prediction_problem(run)
    if problem:
        return problem
    prediction = run.prediction
    if not _number(prediction.get("peak_flops_per_device")):
        return "prediction.json has no peak_flops_per_device (an older record, or a row without a peak)"
    return "no measured stage with the model's FLOPs and bytes (or no stage priced by memory bandwidth)"


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def roofline_view(runs: list[RunView]) -> View:
    """One panel per hardware row (a roof is one machine's): every run's stages on it."""
    by_hardware: dict[str, list[tuple[RunView, dict[str, Any]]]] = {}
    notes = []
    for run in runs:
        points = roofline_points(run)
        if points is None:
            notes.append(f"{run.label}: {missing(run)}")
        else:
            by_hardware.setdefault(f"{points['hardware']}", []).append((run, points))
    if not by_hardware:
        return View.skipped(TITLE, f"Not drawn: no run has the numbers ({'; '.join(notes)}).")
    stages = list(dict.fromkeys(p["stage"] for group in by_hardware.values() for _, r in group for p in r["stages"]))
    palette = dict(zip(stages, sns.color_palette("tab10", len(stages))))
    run_labels = list(dict.fromkeys(run.label for group in by_hardware.values() for run, _ in group))
    shapes = dict(zip(run_labels, "osD^vP*Xh<>p" * (len(run_labels) // 12 + 1)))
    fig, axes = plt.subplots(1, len(by_hardware), figsize=(7.5 * len(by_hardware) + 3, 5.2), squeeze=False)  # + legend
    tips = Tips("roofline")
    for ax, (hardware, group) in zip(axes[0], by_hardware.items()):
        for run, result in group:
            for p in result["stages"]:
                color = palette[p["stage"]]
                (dot,) = ax.plot(
                    p["intensity"], p["achieved"], marker=shapes[run.label], ms=7, ls="none", color=color, zorder=3
                )
                roof = min(result["peak_flops"], result["bandwidth"] * p["intensity"])
                tips.tip(
                    dot,
                    f"{run.label}\n{p['stage']}: {p['intensity']:.3g} FLOP/byte, achieved "
                    f"{_si(p['achieved'], 'FLOP/s')} per device = {p['achieved'] / roof:.1%} of the roof "
                    f"({_si(roof, 'FLOP/s')}, {p['limit']}-bound); model's FLOPs {_si(p['flops'], 'FLOP')}, "
                    f"bytes {_si(p['bytes'], 'B')}, measured {p['measured_s']:.3g} s",
                )
                if p["bound_flops"]:
                    (hollow,) = ax.plot(
                        p["intensity"],
                        p["bound_flops"],
                        marker=shapes[run.label],
                        ms=10,
                        ls="none",
                        mfc="none",
                        mec=color,
                        mew=1.2,
                        zorder=2,
                    )
                    ax.plot([p["intensity"]] * 2, [p["achieved"], p["bound_flops"]], color=color, lw=0.6, ls=":")
                    tips.tip(
                        hollow,
                        f"{run.label}\n{p['stage']}: the model's bound, {_si(p['bound_flops'], 'FLOP/s')}"
                        " per device (its FLOPs over its predicted lower-bound time)",
                    )
        intensities = [p["intensity"] for _, r in group for p in r["stages"]]
        peak, bandwidth = group[0][1]["peak_flops"], group[0][1]["bandwidth"]
        ridge = peak / bandwidth
        x = np.geomspace(min(min(intensities), ridge) / 10, max(max(intensities), ridge) * 10, 200)
        (roof_line,) = ax.plot(x, np.minimum(peak, bandwidth * x), color="#333333", lw=1.5)
        tips.tip(
            roof_line,
            f"roof of {hardware} (a bound): peak {_si(peak, 'FLOP/s')} per device, memory "
            f"{_si(bandwidth, 'B/s')} per device, ridge at {ridge:.3g} FLOP/byte",
        )
        ax.text(x[-1], peak * 1.15, f"peak {_si(peak, 'FLOP/s')} (bound)", ha="right", va="bottom", fontsize=7)
        ax.text(
            x[0] * 2.0,
            bandwidth * x[0] * 1.3,
            f"memory {_si(bandwidth, 'B/s')} (bound)",
            fontsize=7,
            ha="left",
            va="top",
        )
        ax.set(xscale="log", yscale="log")
        lowest = min(min(p["achieved"], p["bound_flops"] or p["achieved"]) for _, r in group for p in r["stages"])
        ax.set_ylim(min(lowest, bandwidth * x[0]) / 3, peak * 3)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _si(v, "")))
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("arithmetic intensity (model FLOPs per byte of memory traffic)")
        ax.set_ylabel("FLOP/s per device (higher is better)")
        ax.set_title(f"hardware row: {hardware}", fontsize=8, loc="left")
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], ls="none", marker="o", color="#555555", label="achieved: model FLOPs / measured time"),
        Line2D([], [], ls="none", marker="o", mfc="none", mec="#555555", label="the model's bound"),
        Line2D([], [], color="#333333", label="roof (a bound)"),
        *[Line2D([], [], ls="none", marker="s", color=palette[s], label=s) for s in stages],
        *[Line2D([], [], ls="none", marker=shapes[r], mfc="none", mec="#333333", label=r) for r in run_labels],
    ]
    axes[0][-1].legend(handles=handles, fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.tight_layout()
    caption = (
        "Each filled marker is a run's stage at its arithmetic intensity (the model's FLOPs over its memory "
        "bytes, prediction.json) and the FLOP/s it achieved per device (those FLOPs over the measured median "
        "stage time: a count over a time, not a hardware counter). The line is the hardware roof, "
        "min(peak, bandwidth × intensity), a bound: the peak from prediction.json, the bandwidth the model "
        "priced the stage's bytes at. Hollow markers: the model's own bound for the stage. Distance below the "
        "roof is time the stage lost to launch latency, framework work or contention."
    )
    return View.drawn(TITLE, caption, tips.svg(fig), notes)
