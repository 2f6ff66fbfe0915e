"""Nightly history: each metric over nights, with change points dated to the night they appeared.

Step detection follows asv's idea (asv/step_detect.py: fit a piecewise-constant
function, penalise each extra step), done with `ruptures`' PELT search:
- the series is the per-night median of a metric over post-warm-up steps,
- it is scaled by a robust noise estimate (MAD of successive differences / √2,
  so a step itself barely inflates the noise),
- PELT minimises the squared-error cost plus a BIC-style penalty of
  `PENALTY_PER_LOG_N · log(n)` per change point,
- a change point is kept only when the segment medians differ by more than the
  threshold (5% by default), and labelled regression or improvement by the
  metric's direction.
Each change names the last night before it and the first night after it, and
what differed between those two records: framework version, rlbench commit,
package versions. A series is one full configuration: framework, workload and
version, parallelism, steps and seed (a night run with other --steps or another
seed is other work, never a point of the same line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ruptures

from rlbench.harness.record.compare import configuration_key
from rlbench.harness.record.schema import STEP_METRICS, headline
from rlbench.harness.spec.parallel import knob_label
from rlbench.reports.load import RunView

HISTORY_METRICS = headline("history")
PENALTY_PER_LOG_N = 3.0
MIN_SEGMENT = 2  # nights; one odd night is noise, not a change


@dataclass(frozen=True)
class ChangePoint:
    index: int  # position in the series of the first night after the change
    before: float  # median of the segment before
    after: float
    ratio: float  # after / before
    kind: str  # "regression" | "improvement"
    last_before: str  # record name of the last night before the change
    first_after: str
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # what differs between those two records


@dataclass(frozen=True)
class Series:
    configuration: str
    metric: str
    unit: str
    direction: str
    nights: list[str]  # started_at of each record
    records: list[str]
    values: list[float]
    changes: list[ChangePoint]
    spreads: list[float] = field(default_factory=list)  # each night's std over its post-warm-up steps
    counts: list[int] = field(default_factory=list)  # each night's n of post-warm-up steps


def robust_sigma(values: np.ndarray) -> float:
    """Noise scale from successive differences: MAD · 1.4826 / √2 (unaffected by a few steps)."""
    diffs = np.diff(values)
    if diffs.size == 0:
        return 0.0
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return 1.4826 * mad / math.sqrt(2)


def detect_steps(
    values, *, threshold: float = 0.05, penalty_per_log_n: float = PENALTY_PER_LOG_N, min_segment: int = MIN_SEGMENT
) -> list[tuple[int, float, float]]:
    """(index where a new level starts, median of the segment before, median of the segment after)."""
    y = np.asarray(values, float)
    n = y.size
    if n < 2 * min_segment:
        return []
    # Floor the noise at 0.1% of the level so a perfectly flat series does not divide by zero.
    sigma = max(robust_sigma(y), 1e-3 * abs(float(np.median(y))), 1e-12)
    breaks = (
        ruptures.Pelt(model="l2", min_size=min_segment, jump=1)
        .fit((y / sigma).reshape(-1, 1))
        .predict(pen=penalty_per_log_n * math.log(n))
    )
    starts = [0, *breaks[:-1]]
    kept = []
    for i, cut in enumerate(breaks[:-1]):
        before = float(np.median(y[starts[i] : cut]))
        after = float(np.median(y[cut : breaks[i + 1]]))
        if before != 0 and abs(after / before - 1) > threshold:
            kept.append((cut, before, after))
    return kept


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    env = record.get("environment") or {}
    return {
        "framework": f"{record['framework']['name']} {record['framework'].get('version')}",
        "rlbench": (record.get("rlbench") or {}).get("git_sha"),
        **{f"package {k}": v for k, v in (env.get("packages") or {}).items()},
        "gpus": ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "none",
        "driver": env.get("driver"),
    }


def _what_changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    a, b = _identity(before), _identity(after)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _label(record: dict[str, Any]) -> str:
    """The full configuration of a record: what must match for two nights to be one series."""
    key = configuration_key(record)
    knobs = knob_label(key["parallel"], empty="")
    return (
        f"{key['framework']} · {key['workload']['name']} v{key['workload']['version']} · {knobs} · "
        f"{record['workload'].get('steps')} steps · seed {record.get('seed', 0)}"
    )


def history(runs: list[RunView], threshold: float = 0.05) -> list[Series]:
    """One series per configuration and metric, over succeeded runs in start order."""
    groups: dict[str, list[RunView]] = {}
    for run in runs:
        if run.record.get("status") == "succeeded" and run.record.get("summary"):
            groups.setdefault(_label(run.record), []).append(run)
    out = []
    for label, group in sorted(groups.items()):
        group.sort(key=lambda r: r.record.get("started_at") or "")
        for metric in HISTORY_METRICS:
            points = [(r, r.record["summary"][metric]["median"]) for r in group if metric in r.record["summary"]]
            if not points:
                continue
            values = [v for _, v in points]
            direction = STEP_METRICS[metric].direction
            changes = []
            for cut, before, after in detect_steps(values, threshold=threshold):
                worse = after > before if direction == "lower" else after < before
                changes.append(
                    ChangePoint(
                        cut,
                        before,
                        after,
                        after / before,
                        "regression" if worse else "improvement",
                        points[cut - 1][0].path.name,
                        points[cut][0].path.name,
                        _what_changed(points[cut - 1][0].record, points[cut][0].record),
                    )
                )
            stats = [r.record["summary"][metric] for r, _ in points]
            out.append(
                Series(
                    label,
                    metric,
                    STEP_METRICS[metric].unit,
                    direction,
                    [r.record.get("started_at") or "" for r, _ in points],
                    [r.path.name for r, _ in points],
                    values,
                    changes,
                    [float(st.get("std", math.nan)) for st in stats],
                    [int(st.get("n", 0)) for st in stats],
                )
            )
    return out
