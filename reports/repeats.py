"""Repeats of one configuration pooled as runs: the spread across runs beside the spread across steps.

Two runs of the same framework, workload version, parallelism and step count are
repeats. Each contributes its own median over post-warm-up steps; the pooled row
gives the median of those run medians, the standard deviation across runs (what
decides whether two configurations differ by more than noise) and, beside it, the
typical spread within a run (the median of the runs' own step-to-step std). The
arithmetic is the sweep's (`rlbench.harness.record.spread.spread`), so a report and a sweep
never disagree on what "spread across repeats" means.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from rlbench.harness.record.compare import configuration_key
from rlbench.harness.record.schema import ARROWS, STEP_METRICS, headline
from rlbench.harness.record.spread import spread
from rlbench.reports.load import RunView, base_label

POOLED_METRICS = headline("sweep")  # pooled as a sweep's closing spread pools them


def _key(record: dict[str, Any]) -> str:
    return json.dumps([configuration_key(record), record["workload"].get("steps")], sort_keys=True, default=str)


def pooled(runs: list[RunView]) -> list[tuple[list[RunView], dict[str, dict[str, Any]]]]:
    """(the repeats, {metric: across-runs spread plus `median` and `within_run_std`}) per configuration run twice
    or more, in first-seen order."""
    groups: dict[str, list[RunView]] = {}
    for run in runs:
        if run.record.get("status") == "succeeded" and run.record.get("summary"):
            groups.setdefault(_key(run.record), []).append(run)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        stats = {}
        for metric in POOLED_METRICS:
            summaries = [r.record["summary"][metric] for r in group if metric in r.record["summary"]]
            medians = [s["median"] for s in summaries]
            if len(medians) < 2:
                continue
            stats[metric] = {
                **spread(medians),
                "median": statistics.median(medians),
                "within_run_std": statistics.median(s.get("std", 0.0) for s in summaries),
            }
        out.append((group, stats))
    return out


def pooled_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    headers = ["configuration", "runs"]
    for metric in POOLED_METRICS:
        m = STEP_METRICS[metric]
        arrow = f" {ARROWS[m.direction]}" if ARROWS.get(m.direction) else ""
        headers += [
            f"{metric} ({m.unit}){arrow}: median of runs ± std across runs",
            f"{metric}: std across steps (median of runs)",
        ]
    rows = []
    for group, stats in pooled(runs):
        label = base_label(group[0].record).rsplit(" · seed", 1)[0]  # repeats may differ in seed
        row = [f"{label} · {group[0].record['workload'].get('steps')} steps", str(len(group))]
        for metric in POOLED_METRICS:
            s = stats.get(metric)
            row += (
                ["–", "–"]
                if s is None
                else [f"{s['median']:.4g} ± {s['std']:.2g} (n={s['n']} runs)", f"{s['within_run_std']:.2g}"]
            )
        rows.append(row)
    return headers, rows
