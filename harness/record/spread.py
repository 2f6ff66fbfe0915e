"""Spread over the repeats of each sweep configuration, and the sweep's closing table. Pure code, no I/O.

Each succeeded run contributes its own median of a metric (over its post-warm-up
steps, from the record's summary); the spread is taken across runs: mean, sample
standard deviation, min, max and coefficient of variation. That is run-to-run
variation of one configuration (same seed), which is what decides whether two
configurations differ by more than noise.

    rlbench sweep --framework trl --workload gsm8k-grpo-tiny --steps 2 --repeats 3
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from rlbench.harness.record.olympic import olympic_score
from rlbench.harness.record.schema import STEP_METRICS, headline
from rlbench.harness.record.status import CellStatus
from rlbench.harness.spec.parallel import knob_label

METRICS = headline("sweep")


def spread(values: list[float]) -> dict[str, float | int | None]:
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None, "cv": None}
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "min": min(values),
        "max": max(values),
        "cv": std / mean if mean else None,
    }


def config_key(cell: dict[str, Any]) -> str:
    return json.dumps([cell["framework"], cell["workload"], cell["parallel"]], sort_keys=True)


def group_spread(
    cells: list[dict[str, Any]],
    summaries: dict[str, dict[str, Any]],
    targets: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One entry per configuration (first-seen order); `summaries` maps a succeeded cell's id to its record summary,
    `targets` to its run.json `target` where the workload has a quality target (scored over the repeats)."""
    groups: dict[str, dict[str, Any]] = {}
    for cell in cells:
        group = groups.setdefault(
            config_key(cell),
            {
                "framework": cell["framework"],
                "workload": cell["workload"],
                "parallel": cell["parallel"],
                "cells": [],
                "statuses": {},
                "metrics": {},
            },
        )
        group["cells"].append(cell["id"])
        group["statuses"][cell["status"]] = group["statuses"].get(cell["status"], 0) + 1
    for group in groups.values():
        for name in METRICS:
            per_run = [summaries[c][name]["median"] for c in group["cells"] if name in summaries.get(c, {})]
            if per_run:
                first = next(summaries[c][name] for c in group["cells"] if name in summaries.get(c, {}))
                group["metrics"][name] = {
                    "unit": first["unit"],
                    "direction": first["direction"],
                    "per_run": per_run,
                    **spread(per_run),
                }
        reached = [(targets or {}).get(c) for c in group["cells"]]
        if any(reached):
            group["target"] = target_spread([t for t in reached if t])
    return list(groups.values())


def target_spread(targets: list[dict[str, Any]]) -> dict[str, Any]:
    """Time to target over a configuration's runs: the olympic score and median of the training seconds (a
    run that did not reach the target counts as slowest), and the steps each reached run took."""
    seconds = [t.get("seconds") if t.get("reached") else None for t in targets]
    return {
        "metric": targets[0]["metric"],
        "value": targets[0]["value"],
        "seconds_per_run": seconds,
        "steps_per_run": [t.get("step") if t.get("reached") else None for t in targets],
        **olympic_score(seconds),
    }


def target_text(target: dict[str, Any]) -> str:
    """One line: the configuration's time to target over its runs, with n, spread and what bounds it."""
    head = f"time to {target['metric']} >= {target['value']:g}: reached in {target['reached']}/{target['n']} runs"
    figures = []
    if target.get("score") is not None:
        figures.append(f"olympic {target['score']:.4g} s +- {target['std']:.2g} (kept {target['kept']})")
    if target.get("median") is not None:
        figures.append(f"median {target['median']:.4g} s")
    if target.get("min") is not None:
        figures.append(f"range {target['min']:.4g}-{target['max']:.4g} s")
    notes = "; ".join(target.get("notes") or [])
    return head + (": " + ", ".join(figures) if figures else "") + (f" ({notes})" if notes else "")


def cell_label(item: dict[str, Any]) -> str:
    knobs = knob_label(item["parallel"])
    return f"{item['framework']} {item['workload']} {knobs}"


def _metric_text(metric: dict[str, Any] | None) -> str:
    if not metric:
        return "-"
    cv = f", cv {metric['cv']:.1%}" if metric["cv"] is not None and metric["n"] > 1 else ""
    return f"{metric['mean']:.4g} +- {metric['std']:.2g} {metric['unit']} (n={metric['n']}{cv})"


def refusals(index: dict[str, Any]) -> list[str]:
    """One line per refused configuration, with the adapter's reason."""
    seen: dict[str, str] = {}
    for cell in index["cells"]:
        if cell["status"] == CellStatus.REFUSED:
            seen.setdefault(config_key(cell), f"refused: {cell_label(cell)}: {cell['reason']}")
    return list(seen.values())


def format_summary(index: dict[str, Any]) -> str:
    """The sweep's closing table: each configuration with its spread, then refused and failed cells."""
    counts: dict[str, int] = {}
    for cell in index["cells"]:
        counts[cell["status"]] = counts.get(cell["status"], 0) + 1
    lines = [
        f"sweep {index['sweep_id']}: {len(index['cells'])} cells: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    ]
    header = ", ".join(f"{m} ({STEP_METRICS[m].direction} is better)" for m in METRICS)
    lines.append(f"  configuration: runs ok/tried: {header}")
    for group in index.get("groups", []):
        tried = sum(n for status, n in group["statuses"].items() if status != CellStatus.REFUSED)
        if not tried:
            continue
        metrics = "  ".join(_metric_text(group["metrics"].get(m)) for m in METRICS)
        lines.append(f"  {cell_label(group)}: {group['statuses'].get('succeeded', 0)}/{tried}: {metrics}")
        if group.get("target"):
            lines.append(f"    {target_text(group['target'])}")
    lines += [f"  {line}" for line in refusals(index)]
    for cell in index["cells"]:
        if cell["status"] in (CellStatus.FAILED, CellStatus.INTERRUPTED):
            kind = (cell.get("error") or {}).get("kind", "?")
            where = f" (record: {cell['record']})" if cell.get("record") else ""
            lines.append(
                f"  {cell['status']}: {cell['id']} {cell_label(cell)} repeat {cell['repeat']}: "
                f"{kind}: {cell['reason']}{where}"
            )
    return "\n".join(lines)
