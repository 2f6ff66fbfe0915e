"""The report's tables: one row per run with the headline metrics and their spread over steps.

Each column names its unit and its direction (↑ higher is better, ↓ lower is better),
so a reader never has to guess. Spread is the standard deviation over post-warm-up
steps; `n` is how many steps that is. Values come from the record's own summary
(computed by the runner when the run ended), never recomputed differently here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rlbench.harness.record.read import DamagedRecord
from rlbench.harness.record.schema import ARROWS, STAGES, STEP_METRICS, headline
from rlbench.harness.record.store import effective_status
from rlbench.reports.load import RunView


@dataclass(frozen=True)
class Column:
    title: str
    unit: str
    direction: str  # "higher" | "lower" | "neutral"

    @property
    def header(self) -> str:
        arrow = ARROWS.get(self.direction, "")
        return f"{self.title} ({self.unit})" + (f" {arrow}" if arrow else "")


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    if abs(value) >= 1e6 or (value != 0 and abs(value) < 1e-3):
        return f"{value:.{digits - 1}e}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def median_spread(values: Iterable[Any]) -> tuple[float, float, int] | None:
    """(median, sample std, n) of the finite values; None without any (std 0 for one value)."""
    kept = pd.Series([float(v) for v in values if v is not None and math.isfinite(float(v))], dtype=float)
    if kept.empty:
        return None
    return float(kept.median()), float(kept.std()) if len(kept) > 1 else 0.0, len(kept)


def _spread(summary: dict[str, Any], name: str, scale: float = 1.0) -> str:
    s = summary.get(name)
    if not s:
        return "–"
    return f"{_fmt(s['median'] * scale)} ± {_fmt(s['std'] * scale, 2)} (n={s['n']})"


def peak_memory_metric(summary: dict[str, Any]) -> str:
    """The GPU peak where there is one; a CPU run's peak is its process tree's PSS (summed RSS in a record written
    before rlbench read PSS, which counts shared pages once per process)."""
    for metric in ("peak_device_memory_gb", "proc_pss_peak_gb"):  # PSS: records before it have summed RSS only
        if metric in summary:
            return metric
    return "proc_rss_peak_gb"


def _metric_column(name: str) -> Column:
    metric = STEP_METRICS[name]
    return Column(metric.title, metric.display_unit, metric.direction)


def summary_rows(
    runs: list[RunView], x_of_fastest: dict[str, float] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the framework × workload × parallelism table: the registry's "report" metrics
    (record.schema.headline; the step time is the common wall_step_time_s, the framework's own timer beside
    it), the step time as a multiple of the fastest framework's on equal work (reports/across.py), the time to
    the first step, then energy and cost per 1M tokens from the record's costs."""
    metrics = headline("report")
    columns = [
        *(_metric_column(name) for name in metrics),
        Column("step time, x of the fastest on equal work", "ratio", "lower"),
        Column("time to first step", "s", "lower"),
        Column("energy per 1M tokens", "kJ", "lower"),
        Column("cost per 1M tokens", "USD", "lower"),
    ]
    headers = ["run", "status", *(c.header for c in columns)]
    rows = []
    for run in runs:
        summary = run.record.get("summary") or {}
        costs = run.record.get("costs") or {}
        energy = costs.get("energy_per_mtok_j")
        first = run.record.get("time_to_first_step_s")
        rows.append(
            [
                run.label,
                effective_status(run.record, run.path),
                *(_metric_cell(summary, name) for name in metrics),
                _fmt((x_of_fastest or {}).get(run.label)),
                _fmt(first if isinstance(first, (int, float)) else None),
                _fmt(energy / 1e3 if energy is not None else None),
                _fmt(costs.get("cost_per_mtok_usd")),
            ]
        )
    return headers, rows


def _metric_cell(summary: dict[str, Any], name: str) -> str:
    if name == "peak_device_memory_gb":  # a CPU run's peak is its process tree's resident memory
        memory = peak_memory_metric(summary)
        return _spread(summary, memory) + ("" if memory == name or memory not in summary else " host")
    return _spread(summary, name, STEP_METRICS[name].scale)


def stage_medians(run: RunView) -> dict[str, float]:
    """Median seconds of each stage the framework reported, over post-warm-up steps."""
    summary = run.record.get("summary") or {}
    return {stage: summary[f"time_{stage}_s"]["median"] for stage in STAGES if f"time_{stage}_s" in summary}


# measured / predicted beyond this factor either way is not a model's error margin but a stage the model does
# not describe on this machine: the row says so.
FAR_OFF = 10.0


def _far_off(run: RunView, stage: str, ratio: float | None) -> str:
    """Why a stage is mispredicted by FAR_OFF or more, in words; empty when it is not."""
    if ratio is None or not math.isfinite(ratio) or 1 / FAR_OFF < ratio < FAR_OFF:
        return ""
    lane = bool(run.record.get("cpu_lane"))
    if stage == "weight_sync":
        return f"{ratio:.3g}x: the model prices the sync as the weights' bytes over the link; here it is the " + (
            "CPU lane's Python and Ray round trip between trainer and rollout engine, a fixed cost no bandwidth "
            "bound describes"
            if lane
            else "framework's per-tensor calls and synchronisation, which dominate a small model's bytes"
        )
    if lane:
        return f"{ratio:.3g}x: a CPU lane's fixed per-call costs, which the model's CPU row does not describe"
    return f"{ratio:.3g}x: off by more than {FAR_OFF:g}x; the model does not describe what this stage did here"


def vs_model_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    headers = ["run", "stage", "measured (s)", "predicted (s)", "measured / predicted", "comment"]
    rows = []
    for run in runs:
        vs = run.record.get("vs_model") or {}
        for stage, row in {**(vs.get("stages") or {}), "whole step": vs.get("step") or {}}.items():
            if row:
                ratio = row.get("measured_over_predicted")
                rows.append(
                    [
                        run.label,
                        stage,
                        _fmt(row.get("measured_s")),
                        _fmt(row.get("predicted_s")),
                        _fmt(ratio),
                        _far_off(run, stage, ratio),
                    ]
                )
        if vs.get("bubble") is not None:
            rows.append([run.label, "bubble 1 − W/(p·T)", "", "", _fmt(vs["bubble"]), ""])
    return headers, rows


def environment_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    headers = ["run", "record", "framework", "rlbench", "hardware", "packages", "started (UTC)", "duration (s)"]
    rows = []
    for run in runs:
        r, env = run.record, run.record.get("environment") or {}
        gpus = env.get("gpus") or []
        hardware = (
            f"{len(gpus)} × {gpus[0].get('name', 'GPU')}, driver {env.get('driver')}"
            if gpus
            else f"CPU: {env.get('cpu_model')} × {env.get('cpu_count')} cores, {_fmt(env.get('memory_gb'))} GB"
        )
        packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
        fw, own = r["framework"], r.get("rlbench") or {}
        rows.append(
            [
                run.label,
                run.path.name,
                f"{fw['name']} {fw.get('version')}" + ("" if fw.get("tested") else " (untested)"),
                f"{own.get('version')} @ {str(own.get('git_sha') or '')[:10]}",
                hardware,
                f"Python {env.get('python')}; {packages}",
                r.get("started_at") or "",
                _fmt(r.get("duration_s")),
            ]
        )
    return headers, rows


def lane_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """What each CPU-lane run substituted for its framework's GPU launch, and the shims it ran with:
    they change what is measured, so they stand beside the figures."""
    headers = ["run", "lane", "substituted for the GPU launch", "shims (upstream code worked around)"]
    rows = []
    for run in runs:
        lane = run.record.get("cpu_lane")
        if not isinstance(lane, dict):
            continue
        settings = lane.get("substituted") if isinstance(lane.get("substituted"), dict) else {}
        shims = [s for s in lane.get("shims") or [] if isinstance(s, dict)]
        rows.append(
            [
                run.label,
                str(lane.get("lane", "?")),
                "; ".join(f"{k}: {v}" for k, v in settings.items()),
                "; ".join(str(s.get("upstream", "?")) for s in shims),
            ]
        )
    return headers, rows


def equal_work_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """Each term of the equal-work contract (`harness.spec.equal_work`) and each named difference, by run: the value
    the launch carried, or why the framework could not match it. Rows where the runs differ come first."""
    views = [(run, run.record.get("equal_work")) for run in runs]
    views = [(run, manifest) for run, manifest in views if isinstance(manifest, dict)]
    terms: dict[str, None] = {}
    for _, manifest in views:
        terms.update(dict.fromkeys(manifest.get("contract") or {}))
    for _, manifest in views:
        terms.update(dict.fromkeys(manifest.get("differences") or {}))
    rows = []
    for term in terms:
        cells = []
        for _, manifest in views:
            contract, differences = manifest.get("contract") or {}, manifest.get("differences") or {}
            cells.append(
                f"differs: {differences[term]}"
                if term in differences
                else str(contract[term])
                if term in contract
                else "n/a"
            )
        rows.append([term, *cells])
    rows.sort(key=lambda row: len(set(row[1:])) == 1)  # stable: differing terms first, contract order kept
    return ["term", *(run.label for run, _ in views)], rows


NODE_COLUMNS = (  # (run.json telemetry.nodes key, column): per_node_summary's values, directions as STEP_METRICS'
    ("gpu_util_mean_pct", Column("GPU util", "%", "higher")),
    ("gpu_mem_peak_gb", Column("GPU mem peak", "GB", "lower")),
    ("power_mean_w", Column("board power", "W", "neutral")),
    ("proc_cpu_mean_pct", Column("framework CPU", "% of one core", "neutral")),
    ("proc_pss_peak_gb", Column("framework PSS peak", "GB", "lower")),
    ("proc_rss_peak_gb", Column("framework RSS peak", "GB", "lower")),
)


@dataclass(frozen=True)
class NodeTable:
    label: str
    table: tuple[list[str], list[list[str]]]
    idle: list[str]  # one sentence per node that idled while others worked (its `why`)


def _count(value: Any) -> str:
    return str(int(value)) if isinstance(value, (int, float)) and math.isfinite(value) else "–"


def _node_row(node: dict[str, Any]) -> list[str]:
    values = [node.get(key) for key, _ in NODE_COLUMNS]
    numbers = [value if isinstance(value, (int, float)) else None for value in values]
    return [
        str(node.get("node", "?")),
        str(node.get("host", "")),
        _count(node.get("samples")),
        _count(node.get("gpus")),
        *(_fmt(value) for value in numbers),
        _count(node.get("proc_count_max")),
    ]


def node_tables(runs: list[RunView]) -> list[NodeTable]:
    """A table of each multi-node run's nodes (run.json telemetry.nodes, from `per_node_summary`) and a line per
    node flagged idle (telemetry.idle_nodes); runs without them (one node, older records) have none."""
    headers = ["node", "host", "samples", "GPUs", *(column.header for _, column in NODE_COLUMNS), "processes"]
    out = []
    for run in runs:
        telemetry = run.record.get("telemetry")
        nodes = telemetry.get("nodes") if isinstance(telemetry, dict) else None
        if not isinstance(nodes, list) or not nodes:
            continue
        rows = [_node_row(node) for node in nodes if isinstance(node, dict)]
        flags = telemetry.get("idle_nodes") or []
        idle = [str(flag["why"]) for flag in flags if isinstance(flag, dict) and flag.get("why")]
        out.append(NodeTable(run.label, (headers, rows), idle))
    return out


_ABANDONED = {
    "abandoned": "run.json still says running, but the rlbench process writing it is gone "
    "(killed, or its machine lost); the steps it logged are in the folder"
}


def failure_rows(
    runs: list[RunView], damaged: list[DamagedRecord] = (), not_run: list[dict[str, str]] = ()
) -> tuple[list[str], list[list[str]]]:
    """Runs that did not succeed, records left out because a file of theirs is damaged, then the runs that
    never started (a sweep's refused cells: {"label", "status", "reason"})."""
    headers = ["run", "record", "status", "cause", "message"]
    rows = [
        [
            run.label,
            run.path.name,
            status,
            (run.record.get("error") or {}).get("kind", ""),
            (run.record.get("error") or {}).get("message", "") or _ABANDONED.get(status, ""),
        ]
        for run in runs
        if (status := effective_status(run.record, run.path)) != "succeeded"
    ]
    rows += [[str(d.path), d.path.name, "not shown", "damaged record", d.problem] for d in damaged]
    rows += [[cell["label"], "–", cell["status"], "not run", cell["reason"]] for cell in not_run]
    return headers, rows
