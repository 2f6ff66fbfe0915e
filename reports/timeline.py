"""Per-step timeline (HTA's temporal breakdown): each step's stages as bars on the time axis, over the traces.

For each run, the top panel is a Gantt chart: one row for the whole step and one per
stage the framework timed, step boundaries as vertical lines, warm-up steps paler.
The panel below it shares the time axis and draws rlbench's own samples
(telemetry.parquet): GPU utilisation and board power where there were GPUs, else the
CPU cores used by the framework's process tree and by the whole host (the gap is
what other processes took) with the tree's resident memory. A multi-node run (Ray
cluster) draws one line per node.

Most frameworks log how long each stage took, not when it began, so a step's stages are
laid end to end from the step's start in pipeline order (`rlbench.harness.record.schema.STAGES`,
the order a colocated step runs them); the caption says so. Where a record has spans.parquet
(the stage calls its framework stamped: TRL's launcher), they are drawn where they ran. Where a step's stages add
up to less than the step, the gap at its end is the untimed rest (optimizer step,
logging).

    from rlbench.reports.timeline import stage_bars, timeline_view
    stage_bars(run)           # one row per (step, stage): start_s, end_s, seconds
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from rlbench.harness.record.schema import STAGES
from rlbench.harness.telemetry.nodes import by_node, nodes_of
from rlbench.reports.load import RunView
from rlbench.reports.svg import Tips, View

MAX_RUNS = 6  # one timeline is two panels high: more runs than this make the page a scroll of timelines
MAX_TRACE_POINTS = 2000  # per trace line: enough for the eye, and keeps the inline SVG small
TITLE = "Per-step timeline"


def stage_bars(run: RunView) -> pd.DataFrame | None:
    """One row per (step, stage) with start_s/end_s in unix seconds, or None without step boundaries.

    Stage "step" is the whole step (its boundaries as the record has them); the others
    follow each other from the step's start, in pipeline order."""
    steps = run.steps
    if steps is None or "step_start_unix_s" not in steps or "step_end_unix_s" not in steps:
        return None
    steps = steps.dropna(subset=["step_start_unix_s", "step_end_unix_s"])
    if steps.empty:
        return None
    warmup = run.record["workload"].get("warmup_steps", 0)
    spans = run.spans if run.spans is not None and not run.spans.empty else None
    rows = []
    for _, step in steps.sort_values("step").iterrows():
        start, end = float(step["step_start_unix_s"]), float(step["step_end_unix_s"])
        common = {"step": int(step["step"]), "warmup": int(step["step"]) <= warmup, "step_s": end - start}
        rows.append({**common, "stage": "step", "start_s": start, "end_s": end, "seconds": end - start})
        if spans is not None:  # the framework stamped each stage call: drawn where it ran, not placed
            for _, span in spans[spans["step"] == common["step"]].sort_values("start_unix_s").iterrows():
                s0, s1 = float(span["start_unix_s"]), float(span["end_unix_s"])
                rows.append(
                    {
                        **common,
                        "stage": str(span["stage"]),
                        "start_s": s0,
                        "end_s": s1,
                        "seconds": s1 - s0,
                        "clipped": False,
                        "placed": False,
                    }
                )
            continue
        cursor = start
        for stage in STAGES:
            seconds = step.get(f"time_{stage}_s")
            if seconds is None or not math.isfinite(seconds) or seconds <= 0 or cursor >= end:
                continue
            # Stages are placed inside their step: where their sum exceeds the step's window (a window from a
            # poll's stamps is up to the poll's lag short, or the framework's stages overlap) the last one is
            # cut at the step's end rather than drawn over the next step.
            stop = min(cursor + seconds, end)
            clipped = stop < cursor + seconds
            rows.append(
                {
                    **common,
                    "stage": stage,
                    "start_s": cursor,
                    "end_s": stop,
                    "seconds": seconds,
                    "clipped": clipped,
                    "placed": True,
                }
            )
            cursor = stop
    return pd.DataFrame(rows)


Line = tuple[str, pd.Series, pd.Series, str, str]  # (name, t, y, colour, line style)
Traces = tuple[str, list[Line], tuple[str, list[Line]] | None]  # (left label, lines, (right label, lines) or None)
LEFT_COLOURS, RIGHT_COLOUR = ("#4c72b0", "#8172b3"), "#c44e52"  # a one-node run's lines


def _node_colours(count: int) -> list[str]:
    return sns.color_palette("tab10", max(count, 1)).as_hex()[:count]


def _traces(run: RunView, lo: float, hi: float) -> Traces | None:
    """(left axis label, lines, (right axis label, lines) or None) inside [lo, hi], or None without samples.

    One node: one line per series, as the run's samples are. Several (a Ray cluster): one per node, in the node's
    colour (the right axis dashed), named after it."""
    t = run.telemetry
    if t is None or t.empty or "source" not in t:
        return None
    t = t[(t["time_unix_s"] >= lo) & (t["time_unix_s"] <= hi)]
    gpu = t[t["source"] == "gpu"]
    if not gpu.empty and "gpu_util_pct" in gpu and gpu["gpu_util_pct"].notna().any():
        return _gpu_traces(gpu)
    host = t[t["source"] == "host"]
    if host.empty or "proc_cpu_util_pct" not in host:
        return None
    return _cpu_traces(run, host)


def _gpu_traces(gpu: pd.DataFrame) -> Traces:
    nodes = by_node(gpu)
    if len(nodes) == 1:
        power = "board power, all GPUs (W)"
        per_time = gpu.groupby("time_unix_s").agg(util=("gpu_util_pct", "mean"), power=("power_w", "sum"))
        return (
            "GPU utilisation (%, mean over GPUs)",
            [("GPU utilisation", per_time.index, per_time["util"], LEFT_COLOURS[0], "-")],
            (power, [(power, per_time.index, per_time["power"], RIGHT_COLOUR, "-")]),
        )
    util, power = [], []
    for (node, rows), colour in zip(nodes, _node_colours(len(nodes))):
        # each node samples on its own clock: averaged per node, so no tick mixes one node's GPUs with another's
        per_time = rows.groupby("time_unix_s").agg(util=("gpu_util_pct", "mean"), power=("power_w", "sum"))
        util.append((f"GPU utilisation, {node}", per_time.index, per_time["util"], colour, "-"))
        power.append((f"board power, {node}", per_time.index, per_time["power"], colour, "--"))
    return "GPU utilisation (%, mean over a node's GPUs)", util, ("board power, a node's GPUs (W)", power)


def _cpu_traces(run: RunView, host: pd.DataFrame) -> Traces:
    nodes = by_node(host)
    cores = (run.record.get("environment") or {}).get("cpu_count")
    if len(nodes) == 1:
        lines = [("framework process tree", host["time_unix_s"], host["proc_cpu_util_pct"] / 100, LEFT_COLOURS[0], "-")]
        if cores and "cpu_util_pct" in host:  # system-wide % of all cores -> cores busy, the framework's unit
            whole = host["cpu_util_pct"] / 100 * cores
            lines.append((f"whole host ({cores:g} cores)", host["time_unix_s"], whole, LEFT_COLOURS[1], "-"))
        rss = None
        if "proc_rss_gb" in host:
            name = "framework RSS (GB)"
            rss = (name, [(name, host["time_unix_s"], host["proc_rss_gb"], RIGHT_COLOUR, "-")])
        return "CPU cores busy", lines, rss
    lines, rss_lines = [], []
    for (node, rows), colour in zip(nodes, _node_colours(len(nodes))):
        lines.append((f"framework CPU, {node}", rows["time_unix_s"], rows["proc_cpu_util_pct"] / 100, colour, "-"))
        if "proc_rss_gb" in rows:
            rss_lines.append((f"framework RSS, {node}", rows["time_unix_s"], rows["proc_rss_gb"], colour, "--"))
    # the environment's core count is the driver's host: a whole-host line in cores only where every node is on it;
    # nodes on one host repeat its reading, so one node's rows draw it
    if cores and "cpu_util_pct" in host and "host" in host and host["host"].nunique() == 1:
        rows = nodes[0][1]
        whole = rows["cpu_util_pct"] / 100 * cores
        lines.append((f"whole host ({cores:g} cores)", rows["time_unix_s"], whole, "#888888", ":"))
    return "CPU cores busy", lines, ("framework RSS (GB)", rss_lines) if rss_lines else None


def _thin(x: pd.Series, y: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, float), np.asarray(y, float)
    step = max(1, math.ceil(len(x) / MAX_TRACE_POINTS))
    return x[::step], y[::step]


def _step_hover(run: RunView, step: pd.Series) -> str:
    """The step's aligned telemetry means (steps.parquet), for the hover over its span on the trace panel."""
    parts = [f"step {int(step['step'])}: {step['step_end_unix_s'] - step['step_start_unix_s']:.3g} s"]
    for column, text, scale in (
        ("gpu_util_mean_pct", "GPU utilisation {:.0f}%", 1),
        ("power_mean_w", "power {:.0f} W", 1),
        ("energy_j", "energy {:.0f} J", 1),
        ("proc_cpu_util_mean_pct", "framework {:.2f} cores", 0.01),
        ("cpu_util_mean_pct", "host CPU {:.0f}% of all cores", 1),
        ("proc_rss_peak_gb", "framework RSS peak {:.3g} GB", 1),
    ):
        value = step.get(column)
        if value is not None and math.isfinite(value):
            parts.append(text.format(value * scale))
    return f"{run.label}\n" + ", ".join(parts)


def _draw_run(tips: Tips, gantt: plt.Axes, trace: plt.Axes, run: RunView, bars: pd.DataFrame) -> str | None:
    """Both panels of one run; returns a note when the run has no telemetry in its steps' window."""
    origin = bars["start_s"].min()
    stages = [s for s in ["step", *STAGES] if s in set(bars["stage"])]
    palette = dict(zip(STAGES, sns.color_palette("tab10", len(STAGES))))
    palette["step"] = (0.55, 0.55, 0.55)
    for _, bar in bars.iterrows():
        row = stages.index(bar["stage"])
        rect = gantt.barh(
            row,
            bar["end_s"] - bar["start_s"],
            left=bar["start_s"] - origin,
            height=0.7,
            color=palette[bar["stage"]],
            alpha=0.4 if bar["warmup"] else 0.95,
            lw=0,
        )[0]
        share = (
            ""
            if bar["stage"] == "step"
            else f" of the step's {bar['step_s']:.3g} s ({bar['seconds'] / bar['step_s']:.0%})"
        )
        name = "whole step" if bar["stage"] == "step" else bar["stage"]
        tips.tip(
            rect,
            f"{run.label}\nstep {bar['step']}{' (warm-up)' if bar['warmup'] else ''} · {name}: "
            f"{bar['seconds']:.3g} s{share}, from +{bar['start_s'] - origin:.2f} s"
            + (
                ", drawn cut at the step's end (the stages add up to more than its window)"
                if bar.get("clipped")
                else ""
            ),
        )
    gantt.set_yticks(range(len(stages)), ["whole step" if s == "step" else s for s in stages], fontsize=7)
    gantt.set_ylim(len(stages) - 0.4, -0.6)
    whole = bars[bars["stage"] == "step"]
    label_every = max(1, math.ceil(len(whole) / 30))  # step numbers stay legible on long runs
    for i, (_, step) in enumerate(whole.iterrows()):
        for ax in (gantt, trace):
            ax.axvline(step["start_s"] - origin, color="#444444", lw=0.6, ls=":")
        if i % label_every == 0:
            gantt.text(
                (step["start_s"] + step["end_s"]) / 2 - origin,
                -0.55,
                str(step["step"]),
                ha="center",
                va="bottom",
                fontsize=7,
                color="#444444",
            )
    for ax in (gantt, trace):
        ax.axvline(whole["end_s"].max() - origin, color="#444444", lw=0.6, ls=":")
    warm = whole[whole["warmup"]]
    if not warm.empty:
        gantt.axvspan(
            warm["start_s"].min() - origin,
            warm["end_s"].max() - origin,
            color="#f2e6c9",
            alpha=0.5,
            lw=0,
            zorder=0,
            label="warm-up",
        )
    span = whole["end_s"].max() - origin
    lo, hi = origin - 0.03 * span, whole["end_s"].max() + 0.03 * span
    gantt.set_xlim(lo - origin, hi - origin)
    gantt.set_title(run.label, fontsize=8, loc="left", pad=10)
    traces = _traces(run, lo, hi)
    steps = run.steps.dropna(subset=["step_start_unix_s", "step_end_unix_s"])
    for _, step in steps.iterrows():  # an invisible hover area per step: the step's aligned telemetry means
        tips.tip(
            trace.axvspan(step["step_start_unix_s"] - origin, step["step_end_unix_s"] - origin, alpha=0, zorder=0),
            _step_hover(run, step),
            zone=True,
        )
    trace.set_xlabel("seconds since the first step began", fontsize=7)
    if traces is None:
        trace.text(
            0.5,
            0.5,
            "no telemetry samples in the steps' window",
            transform=trace.transAxes,
            ha="center",
            va="center",
            fontsize=7,
            color="#888888",
        )
        trace.set_yticks([])
        return f"{run.label}: no telemetry samples while its steps ran"
    left_label, lines, right = traces
    handles = []
    for name, x, y, colour, style in lines:
        x, y = _thin(x, y)
        (line,) = trace.plot(x - origin, y, color=colour, ls=style, lw=1, label=name)
        handles.append(line)
        tips.tip(
            line,
            f"{run.label}\n{name}: mean {np.nanmean(y):.3g}, max {np.nanmax(y):.3g} ({left_label})" if len(y) else name,
        )
    trace.set_ylabel(left_label, fontsize=7)
    top = max((np.nanmax(np.asarray(y, float)) for _, _, y, _, _ in lines if len(y)), default=1.0)
    trace.set_ylim(0, max(top, 1e-9) * 1.12)  # a host line pinned at all cores stays visible under the frame
    if right is not None:
        right_label, right_lines = right
        twin = trace.twinx()
        for name, x, y, colour, style in right_lines:
            x, y = _thin(x, y)
            (line,) = twin.plot(x - origin, y, color=colour, ls=style, lw=1, label=name)
            handles.append(line)
            tips.tip(line, f"{run.label}\n{name}: mean {np.nanmean(y):.3g}, max {np.nanmax(y):.3g}" if len(y) else name)
        twin.set_ylabel(right_label, fontsize=7, color=right_lines[0][3] if len(right_lines) == 1 else "#444444")
        twin.grid(False)
        twin.set_ylim(bottom=0)
    trace.legend(handles=handles, fontsize=6, loc="lower left")
    return None


def _multi_node(run: RunView) -> bool:
    return run.telemetry is not None and len(nodes_of(run.telemetry)) > 1


def timeline_view(runs: list[RunView]) -> View:
    """The timeline of each run with step boundaries (at most MAX_RUNS), or why there is none."""
    drawable, notes = [], []
    for run in runs:
        bars = stage_bars(run)
        if bars is None:
            notes.append(f"{run.label}: steps.parquet has no step boundaries (step_start_unix_s, step_end_unix_s)")
        else:
            drawable.append((run, bars))
    if not drawable:
        return View.skipped(
            TITLE, f"Not drawn: no run recorded step boundaries ({'; '.join(notes) if notes else 'no runs'})."
        )
    if len(drawable) > MAX_RUNS:
        notes += [
            f"{run.label}: left out (the timeline shows the first {MAX_RUNS} runs; report fewer records to see it)"
            for run, _ in drawable[MAX_RUNS:]
        ]
        drawable = drawable[:MAX_RUNS]
    heights = []
    for _, bars in drawable:
        heights += [0.9 + 0.22 * bars["stage"].nunique(), 1.7]
    fig, axes = plt.subplots(
        len(heights),
        1,
        figsize=(11, sum(heights) + 0.4 * len(drawable)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
        layout="constrained",
    )
    tips = Tips("timeline")
    for i, (run, bars) in enumerate(drawable):
        gantt, trace = axes[2 * i][0], axes[2 * i + 1][0]
        trace.sharex(gantt)
        gantt.tick_params(labelbottom=False)
        note = _draw_run(tips, gantt, trace, run, bars)
        if note:
            notes.append(note)
    caption = (
        "Each run's steps on one time axis: bars are the stages the framework timed (paler: warm-up steps), "
        "dotted lines the step boundaries, step numbers on top. Most frameworks log each stage's duration, not "
        "its start, so their stages are laid end to end from the step's start in pipeline order (a framework "
        "that stamps each stage call, TRL through rlbench's launcher, is drawn where its stages ran); the gap "
        "to the step's end is untimed work. Below: rlbench's own samples over the same seconds (CPU runs: "
        "cores used by the framework's processes and by the whole host, whose gap is other processes; GPU runs: "
        "utilisation "
        "and board power). Hover a bar, a line or a step's span for its values."
    )
    if any(_multi_node(run) for run, _ in drawable):
        caption += " A run on several nodes (Ray cluster) draws one line per node, the right axis dashed."
    return View.drawn(TITLE, caption, tips.svg(fig), notes)
