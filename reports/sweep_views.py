"""Sweep and scaling views: each metric against each swept knob, every cell of the grid shown.

A sweep's index (sweep.json, `rlbench.harness.record.sweep_index`) says which cells ran, which failed
and which were refused before anything ran, and why. The report finds the indexes
beside or under the folders it was given, joins each cell to its run record, and draws
- one panel per (metric, swept axis): x the axis's values in the order the sweep asked
  for them (frameworks, workloads and every `--grid` knob with more than one value), y
  each succeeded run's median, one line per combination of the other axes through the
  median of its repeats; cells with no result are marked under the axis (x: refused,
  triangle: failed or interrupted) with their reason on hover;
- the grid as a sortable table, one row per cell with its status and reason.
Throughput is per GPU where the runs had GPUs (the scaling view: tokens/s/GPU against
dp, tp or placement), else per run.

    rlbench report results/<UTC time>-sweep-<id>/ --out sweep.html
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.schema import ARROWS, STEP_METRICS
from rlbench.harness.record.store import effective_status
from rlbench.harness.record.sweep_index import INDEX_FILE, load_index
from rlbench.reports.headline import RUN_METRICS
from rlbench.reports.load import RunView
from rlbench.reports.svg import Tips, View
from rlbench.reports.tables import peak_memory_metric

TITLE = "Sweep"
MISSING_MARKS = {"refused": ("x", "#c44e52"), "failed": ("v", "#dd8452"), "interrupted": ("v", "#937860")}


@dataclass(frozen=True)
class Sweep:
    path: Path
    index: dict[str, Any]
    runs: dict[str, RunView]  # cell id -> the view of its record, for cells whose record was loaded

    @property
    def name(self) -> str:
        return str(self.index.get("sweep_id") or self.path.name)


def find_sweeps(paths: list[Path], runs: list[RunView], notes: list[str]) -> list[Sweep]:
    """Sweep indexes in or under `paths` and beside the runs' records; a damaged index is noted and left out."""
    folders: dict[Path, None] = {}
    for path in map(Path, paths):
        if (path / INDEX_FILE).is_file():
            folders[path.resolve()] = None
        elif path.is_dir():
            folders.update(dict.fromkeys(p.parent.resolve() for p in sorted(path.rglob(INDEX_FILE))))
    for run in runs:
        if (run.path.parent / INDEX_FILE).is_file():
            folders[run.path.parent.resolve()] = None
    by_path = {run.path.resolve(): run for run in runs}
    sweeps = []
    for folder in folders:
        try:
            index = load_index(folder)
        except RLBenchError as exc:
            notes.append(f"sweep index left out: {exc}")
            continue
        cells = {
            c["id"]: by_path[(folder / c["record"]).resolve()]
            for c in index["cells"]
            if c.get("record") and (folder / c["record"]).resolve() in by_path
        }
        sweeps.append(Sweep(folder, index, cells))
    return sweeps


def swept_axes(sweep: Sweep) -> dict[str, list[str]]:
    """Axis -> values in request order, for every axis the sweep varies (more than one value)."""
    request = sweep.index.get("request") or {}
    axes = {
        "framework": [str(v) for v in request.get("frameworks") or []],
        "workload": [str(v) for v in request.get("workloads") or []],
        **{
            str(k): [str(v) for v in values]
            for k, values in (request.get("grid") or {}).items()
            if isinstance(values, list)
        },
    }
    return {axis: values for axis, values in axes.items() if len(values) > 1}


def cell_value(cell: dict[str, Any], axis: str) -> str:
    return str(cell.get(axis) if axis in ("framework", "workload") else (cell.get("parallel") or {}).get(axis))


def _metrics(sweep: Sweep) -> list[tuple[str, str, float]]:
    """(summary metric, axis label, scale) the sweep's runs have: per-GPU throughput where there were GPUs."""
    summaries = [run.record.get("summary") or {} for run in sweep.runs.values()]
    throughput = "tokens_per_s_per_gpu" if any("tokens_per_s_per_gpu" in s for s in summaries) else "tokens_per_s"
    memory = next((peak_memory_metric(s) for s in summaries if peak_memory_metric(s) in s), "peak_device_memory_gb")
    chosen = [(throughput, 1.0), ("wall_step_time_s", 1.0), ("mfu", 100.0), (memory, 1.0)]
    out = []
    for name, scale in chosen:
        if not any(name in s for s in summaries):
            continue
        m = STEP_METRICS[name]
        unit = "%" if scale == 100.0 else m.unit
        arrow = f"{ARROWS[m.direction]} better" if ARROWS[m.direction] else ""
        out.append((name, f"{name}\n({unit}, {arrow})", scale))
    return out or [("step_time_s", "step_time_s\n(s, ↓ better)", 1.0)]  # records without step-end stamps


def _median(run: RunView, metric: str) -> float | None:
    value = ((run.record.get("summary") or {}).get(metric) or {}).get("median")
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _reason(cell: dict[str, Any], run: RunView | None) -> str:
    """The index's reason, else what the cell's own record says (a run whose runner died leaves none in the index)."""
    if cell.get("reason"):
        return str(cell["reason"])
    if run is None:
        return ""
    status = effective_status(run.record, run.path)
    message = (run.record.get("error") or {}).get("message") or ""
    return "" if status == "succeeded" else f"record says {status}" + (f": {message}" if message else "")


def _cell_text(cell: dict[str, Any]) -> str:
    knobs = " ".join(f"{k}={v}" for k, v in (cell.get("parallel") or {}).items())
    return f"{cell['id']} {cell['framework']} {cell['workload']} {knobs} (repeat {cell['repeat']})"


def _series(sweep: Sweep, axis: str, values: list[str], others: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The cells on `axis`, grouped by their values of the other axes (one line each)."""
    series: dict[str, list[dict[str, Any]]] = {}
    for cell in sweep.index["cells"]:
        if cell_value(cell, axis) in values:
            series.setdefault(" ".join(f"{o}={cell_value(cell, o)}" for o in others) or "all", []).append(cell)
    return series


def _numeric(values: list[str]) -> bool:
    """Whether an axis's values are numbers (dp=1, 2, 4: ordered) rather than categories (trl, verl)."""
    try:
        [float(v) for v in values]
    except (TypeError, ValueError):
        return False
    return True


def _panel(
    tips: Tips,
    ax: plt.Axes,
    sweep: Sweep,
    axis: str,
    values: list[str],
    metric: str,
    scale: float,
    series: dict[str, list[dict[str, Any]]],
    marks: bool,
) -> None:
    """One metric against one axis; `marks`: also mark the cells with no result (top row only: once per axis)."""
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    colors = sns.color_palette("tab10", len(series))
    for number, ((name, cells), color) in enumerate(zip(series.items(), colors)):
        shift = 0.16 * (number - (len(series) - 1) / 2)  # series side by side at each x, repeats within
        medians = []
        for x, value in enumerate(values):
            here = [c for c in cells if cell_value(c, axis) == value]
            ys = []
            for k, cell in enumerate(here):
                run = sweep.runs.get(cell["id"])
                y = _median(run, metric) if run is not None and cell["status"] == "succeeded" else None
                at = x + shift + 0.05 * (k - (len(here) - 1) / 2)
                if y is not None:
                    ys.append(y * scale)
                    (dot,) = ax.plot(at, y * scale, marker="o", ms=6, ls="none", color=color)
                    tips.tip(
                        dot,
                        f"{_cell_text(cell)}: {metric} median {y * scale:.4g} over "
                        f"n={run.record['summary'][metric]['n']} post-warm-up steps",
                    )
                elif marks and (cell["status"] != "succeeded" or run is None):
                    marker, mark_color = MISSING_MARKS.get(cell["status"], ("o", "#999999"))
                    (mark,) = ax.plot(
                        at,
                        0.06,
                        marker=marker,
                        ms=8,
                        ls="none",
                        mew=2,
                        color=mark_color,
                        transform=bottom,
                        clip_on=False,
                    )
                    why = _reason(cell, run) or "no reason recorded"
                    tips.tip(mark, f"{_cell_text(cell)}: {cell['status']}: {why}")
            medians.append(statistics.median(ys) if ys else math.nan)
        # A line between x positions claims a trend; between categories (frameworks, placements) there is none, so
        # there each median is a short bar at its own category.
        ordered = _numeric(values)
        (line,) = ax.plot(
            [x + shift for x in range(len(values))],
            medians,
            color=color,
            lw=1.2 if ordered else 0,
            label=name,
            marker=None if ordered else "_",
            ms=0 if ordered else 14,
            mew=2,
        )
        tips.tip(
            line,
            f"{name}: median over repeats, {metric}: "
            + (
                ", ".join(f"{axis}={v}: {m:.4g}" for v, m in zip(values, medians) if not math.isnan(m))
                or "no succeeded run"
            ),
        )
    ax.set_xticks(range(len(values)), values, fontsize=8)
    ax.set_xlim(-0.5, len(values) - 0.5)


def sweep_view(sweep: Sweep, number: int = 0) -> View:
    """The panels of one sweep, or why there are none; `number` keeps two sweeps' SVG ids apart on one page."""
    title = f"{TITLE} {sweep.name}: each metric against each swept axis"
    axes_values = swept_axes(sweep)
    if not axes_values:
        return View.skipped(title, "Not drawn: the sweep varies nothing (every axis has one value).")
    metrics = _metrics(sweep)
    axis_names = list(axes_values)
    fig, grid = plt.subplots(
        len(metrics),
        len(axis_names),
        figsize=(3.8 * len(axis_names) + 1.2, 2.2 * len(metrics) + 1.4),
        squeeze=False,
        layout="constrained",
    )
    tips = Tips(f"sweep{number}-" + re.sub(r"[^\w-]", "", sweep.name.rsplit("-", 1)[-1]))
    for col, axis in enumerate(axis_names):
        series = _series(sweep, axis, axes_values[axis], [a for a in axis_names if a != axis])
        for row, (metric, label, scale) in enumerate(metrics):
            ax = grid[row][col]
            _panel(tips, ax, sweep, axis, axes_values[axis], metric, scale, series, marks=row == 0)
            ax.set_ylim(0, max(ax.get_ylim()[1], 1e-9) * 1.1)  # from zero: scaling is read as a ratio
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            if row == len(metrics) - 1:
                ax.set_xlabel(axis, fontsize=8)
        handles = grid[0][col].get_legend_handles_labels()[0]
        if col == 0:  # the marks of cells without a result, once
            handles += [
                Line2D([], [], ls="none", marker=m, color=c, mew=2, label=f"{status}: no result")
                for status, (m, c) in MISSING_MARKS.items()
            ]
        grid[0][col].legend(
            handles=handles,
            fontsize=6,
            loc="lower left",
            bbox_to_anchor=(0, 1.02),
            frameon=False,
            title=f"lines: other axes ({len(series)})",
            title_fontsize=6,
        )
    statuses = [c["status"] for c in sweep.index["cells"]]
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in dict.fromkeys(statuses))
    caption = (
        f"{len(statuses)} cells: {counts}. Each panel is one metric (row) against one swept axis (column); "
        "a dot is one succeeded run's median over its post-warm-up steps, a line joins the medians of the "
        "repeats of one combination of the other axes (legend above each column). Cells without a result "
        "are marked under the top row's axis: red x refused before anything ran, triangle failed or "
        "interrupted. Hover any mark for the cell, its value or its reason; every cell is in the table "
        "below."
    )
    return View.drawn(title, caption, tips.svg(fig))


def grid_rows(sweep: Sweep) -> tuple[list[str], list[list[str]]]:
    """One row per cell: the swept values, status, reason and the headline medians of its run."""
    axes = list(swept_axes(sweep)) or ["framework"]
    metrics = [STEP_METRICS[name] for name in RUN_METRICS]
    headers = [
        "cell",
        *axes,
        "repeat",
        "status",
        "reason",
        *(f"{m.title} ({m.display_unit}) {ARROWS[m.direction]}" for m in metrics),
        "record",
    ]
    rows = []
    for cell in sweep.index["cells"]:
        run = sweep.runs.get(cell["id"])
        values = [None if run is None or (v := _median(run, m.name)) is None else v * m.scale for m in metrics]
        rows.append(
            [
                cell["id"],
                *(cell_value(cell, a) for a in axes),
                str(cell["repeat"]),
                cell["status"],
                _reason(cell, run),
                *("–" if v is None else f"{v:.4g}" for v in values),
                cell.get("record") or "–",
            ]
        )
    return headers, rows
