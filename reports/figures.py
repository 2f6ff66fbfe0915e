"""The report's figures, drawn with seaborn/matplotlib and embedded as base64 PNG.

Each function takes run views and returns a `Figure` (title, caption, PNG data
URI), or None when no run has the data, so the report says "not measured"
instead of drawing an empty axis. matplotlib's Agg backend draws without a screen.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display on CI or GPU runners

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from rlbench.harness.record.schema import ARROWS, STAGES  # noqa: E402
from rlbench.harness.telemetry.nodes import by_node  # noqa: E402
from rlbench.reports.load import RunView  # noqa: E402
from rlbench.reports.tables import stage_medians  # noqa: E402

sns.set_theme(style="whitegrid", context="notebook")


@dataclass(frozen=True)
class Figure:
    title: str
    caption: str
    data_uri: str


def _encode(fig: plt.Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _height(rows: int) -> float:
    return max(2.2, 0.55 * rows + 1.4)


def stage_breakdown(runs: list[RunView]) -> Figure | None:
    """Stacked bars: median seconds per stage, per run; the gap to the step time is 'other'."""
    rows = []
    for run in runs:
        stages = stage_medians(run)
        step = (run.record.get("summary") or {}).get("step_time_s", {}).get("median")
        if not stages or step is None:
            continue
        rows.append({"run": run.label, **stages, "other": max(step - sum(stages.values()), 0.0)})
    if not rows:
        return None
    table = pd.DataFrame(rows).set_index("run").fillna(0.0)
    # Pipeline order (generation first, weight sync last), 'other' at the end: never in whichever order runs came.
    table = table[[stage for stage in STAGES if stage in table.columns] + ["other"]]
    fig, ax = plt.subplots(figsize=(9, _height(len(table))))
    colors = [*sns.color_palette("tab10", len(table.columns) - 1), (0.75, 0.75, 0.75)]  # 'other' in grey
    table.plot.barh(stacked=True, ax=ax, color=colors, width=0.6)
    ax.set_xlabel("median time per RL step (s, lower is better)")
    ax.set_ylabel("")
    ax.invert_yaxis()
    ax.legend(title="stage", bbox_to_anchor=(1.01, 1), loc="upper left")
    return Figure(
        "Per-stage time breakdown",
        "Median over post-warm-up steps of each stage the framework timed; "
        "'other' is the step time not covered by a timed stage (optimizer step, logging, gaps).",
        _encode(fig),
    )


def measured_vs_predicted(runs: list[RunView]) -> Figure | None:
    """Grouped bars of measured and predicted seconds per stage (log scale: they can differ by 10x)."""
    rows = []
    for run in runs:
        vs = run.record.get("vs_model") or {}
        for stage, row in {**(vs.get("stages") or {}), "step": vs.get("step") or {}}.items():
            for kind in ("measured", "predicted"):
                if row.get(f"{kind}_s"):
                    rows.append({"run": run.label, "stage": stage, "kind": kind, "seconds": row[f"{kind}_s"]})
    if not rows:
        return None
    table = pd.DataFrame(rows)
    grid = sns.catplot(
        data=table,
        kind="bar",
        x="stage",
        y="seconds",
        hue="kind",
        col="run",
        col_wrap=2,
        height=3.0,
        aspect=1.5,
        sharey=False,
        palette={"measured": "#4c72b0", "predicted": "#dd8452"},
    )
    grid.set(yscale="log")
    for ax in grid.axes.flat:  # stage names are long: slanted, they never run into each other
        ax.tick_params(axis="x", labelrotation=35, labelsize=7)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    grid.set_titles("{col_name}", size=8)
    grid.set_axis_labels("stage", "median s per step (log)")
    return Figure(
        "Measured vs predicted (work-depth model)",
        "Measured median stage time next to the work-depth model's roofline prediction for the run's exact "
        "configuration (prediction.json). Ratios are in the table below.",
        _encode(grid.figure),
    )


Series = list[tuple[str, pd.Series, pd.Series]]  # (node, x, y) per line: one line ("" for its node) on one node


def _per_node(rows: pd.DataFrame, start: float, one: Callable[[pd.DataFrame], tuple]) -> tuple[Series, Series]:
    """The two panels' lines: `one(rows)` gives (x, left y, right y) of one node's rows; one line per node."""
    nodes = by_node(rows)
    left, right = [], []
    for node, part in nodes:
        x, y1, y2 = one(part)
        name = node if len(nodes) > 1 else ""  # a one-node run: one unnamed line, as always
        left.append((name, x - start, y1))
        right.append((name, x - start, y2))
    return left, right


def _gpu_lines(gpu: pd.DataFrame) -> tuple:
    # a node's GPUs share its sampler's ticks: per node, no tick mixes one node's GPUs with another's
    per_time = gpu.groupby("time_unix_s").agg(util=("gpu_util_pct", "mean"), power=("power_w", "sum"))
    return per_time.index.to_series(), per_time["util"], per_time["power"]


def _host_lines(host: pd.DataFrame) -> tuple:
    return host["time_unix_s"], host["proc_cpu_util_pct"], host["proc_rss_gb"]


def _draw_lines(ax: plt.Axes, lines: Series, colour: str, prefix: str) -> None:
    """One line, in `colour`, on a one-node run; one per node in the palette's colours, with a legend, on several."""
    if len(lines) == 1:
        _, x, y = lines[0]
        ax.plot(x, y, color=colour, lw=1)
        return
    for (node, x, y), node_colour in zip(lines, sns.color_palette("tab10", len(lines))):
        ax.plot(x, y, color=node_colour, lw=1, label=f"{prefix}, {node}")
    ax.legend(fontsize=6, loc="best")


def telemetry_timeline(runs: list[RunView]) -> Figure | None:
    """GPU utilisation and power over the run (NVML); CPU utilisation and RSS when there was no GPU.
    A multi-node run draws one line per node."""
    series = []
    runs_by_label = {run.label: run for run in runs}
    origins: dict[str, float] = {}
    for run in runs:
        t = run.telemetry
        if t is None or t.empty:
            continue
        gpu = t[t["source"] == "gpu"] if "source" in t else t.iloc[0:0]
        start = origins[run.label] = float(t["time_unix_s"].min())
        if not gpu.empty and gpu["gpu_util_pct"].notna().any():
            util, power = _per_node(gpu, start, _gpu_lines)
            series.append((run.label, util, "GPU util (%)", "GPU util", power, "board power, all GPUs (W)", "power"))
        else:
            host = t[t["source"] == "host"] if "source" in t else t
            cpu, rss = _per_node(host, start, _host_lines)
            series.append(
                (
                    run.label,
                    cpu,
                    "framework CPU (% of one core)",
                    "framework CPU",
                    rss,
                    "framework RSS (GB)",
                    "framework RSS",
                )
            )
    if not series:
        return None
    fig, axes = plt.subplots(len(series), 2, figsize=(10, 2.4 * len(series)), squeeze=False)
    for row, (label, lines1, name1, prefix1, lines2, name2, prefix2) in enumerate(series):
        _draw_lines(axes[row][0], lines1, "#4c72b0", prefix1)
        axes[row][0].set_ylabel(name1, fontsize=8)
        _draw_lines(axes[row][1], lines2, "#c44e52", prefix2)
        axes[row][1].set_ylabel(name2 if len(lines2) == 1 else name2.replace("all GPUs", "a node's GPUs"), fontsize=8)
        axes[row][0].set_title(label, fontsize=8, loc="left")
        steps = runs_by_label[label].steady_steps
        if steps is not None and "step_start_unix_s" in steps and steps["step_start_unix_s"].notna().any():
            for ax in axes[row]:  # shade the post-warm-up steps the summary is taken over
                for start, end in zip(steps["step_start_unix_s"], steps["step_end_unix_s"]):
                    ax.axvspan(start - origins[label], end - origins[label], color="#dddddd", alpha=0.5, lw=0)
        for ax in axes[row]:
            ax.set_xlabel("seconds since sampling began", fontsize=8)
    fig.tight_layout()
    return Figure(
        "Utilisation and power over time",
        "rlbench's own sampler (telemetry.parquet): NVML per GPU where "
        "there were GPUs, else the framework's process tree on the host. Shaded: the post-warm-up steps."
        + (" Runs on several nodes (Ray cluster): one line per node." if any(len(s[1]) > 1 for s in series) else ""),
        _encode(fig),
    )


def comm_volume(runs: list[RunView]) -> Figure | None:
    """Bytes per collective type over the run, from NCCL's own logs (comm.parquet)."""
    rows = []
    for run in runs:
        if run.comm is None or run.comm.empty:
            continue
        per_op = run.comm.groupby("op")["total_bytes"].sum() / 1e9
        rows += [{"run": run.label, "collective": op, "GB": gb} for op, gb in per_op.items()]
    if not rows:
        return None
    table = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(9, _height(table["run"].nunique())))
    sns.barplot(data=table, y="run", x="GB", hue="collective", ax=ax, orient="h")
    ax.set_xlabel("bytes moved by NCCL collectives over the run (GB, 1e9)")
    ax.set_ylabel("")
    return Figure(
        "Communication volume per collective",
        "Summed over every process's NCCL INFO lines (NCCL_DEBUG_SUBSYS=COLL).",
        _encode(fig),
    )


def all_figures(runs: list[RunView]) -> dict[str, Figure | None]:
    return {
        "stages": stage_breakdown(runs),
        "vs_model": measured_vs_predicted(runs),
        "telemetry": telemetry_timeline(runs),
        "comm": comm_volume(runs),
    }


def _night_label(started_at: str) -> str:
    """'2026-11-08T02:00:00+00:00' -> '2026-11-08 02:00': two nights of one day stay apart."""
    return started_at[:16].replace("T", " ") if started_at else "?"


def history_figure(series) -> Figure | None:
    """One panel per (configuration, metric): the nightly medians with each night's spread over its steps
    (median ± std, a band), and change points as dashed lines."""
    if not series:
        return None
    fig, axes = plt.subplots(len(series), 1, figsize=(10, 2.5 * len(series)), squeeze=False)
    for ax, s in zip(axes[:, 0], series):
        x = list(range(len(s.values)))
        ax.plot(x, s.values, marker="o", ms=3, lw=1, color="#4c72b0", label="median over post-warm-up steps")
        if s.spreads:
            spread = [0.0 if math.isnan(d) else d for d in s.spreads]  # a night without a std: no band there
            low, high = [v - d for v, d in zip(s.values, spread)], [v + d for v, d in zip(s.values, spread)]
            ax.fill_between(x, low, high, color="#4c72b0", alpha=0.18, lw=0, label="± std over the night's steps")
        for change in s.changes:
            ax.axvline(change.index - 0.5, ls="--", color="#c44e52" if change.kind == "regression" else "#55a868")
        arrow = f"{ARROWS[s.direction]} better" if ARROWS.get(s.direction) else ""
        low_n, high_n = (min(s.counts), max(s.counts)) if s.counts else (0, 0)
        n = (
            ""
            if not s.counts
            else f", n = {low_n} steps a night"
            if low_n == high_n
            else f", n = {low_n}-{high_n} steps a night"
        )
        ax.set_title(f"{s.configuration}: {s.metric} ({arrow}{n})", fontsize=8, loc="left")
        ax.set_ylabel(f"{s.metric}\n({s.unit})", fontsize=7)
        ax.set_xlabel("night (start, UTC)", fontsize=7)
        ax.set_xticks(x, [_night_label(n) for n in s.nights], rotation=45, fontsize=6, ha="right")
        ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    return Figure(
        "Metrics over nights",
        "Per-night median over post-warm-up steps with a band of ± one standard "
        "deviation over that night's steps; dashed lines are detected change points (red: regression, "
        "green: improvement). One line per full configuration (framework, workload version, parallelism, "
        "steps, seed).",
        _encode(fig),
    )
