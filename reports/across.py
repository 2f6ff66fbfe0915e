"""Frameworks against each other on equal work: the report's "x of the fastest" column and verdict lines.

Runs are grouped as `rlbench compare` allows two frameworks to be compared: the same workload version,
layout and data digest, different frameworks. In each group the fastest run by median wall_step_time_s
(the one step-time definition for every framework) is the reference; every other run gets its ratio to it
and the same verdict compare prints, from the same test on the post-warm-up steps. A contended run is
marked, not ranked silently.

    from rlbench.reports.across import across_frameworks
    view = across_frameworks(runs)   # view.x_of_fastest[label], view.lines
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from rlbench.harness.record.compare import ACROSS_METRIC, across_verdict, configuration_key, data_digest
from rlbench.harness.record.contention import contention
from rlbench.harness.record.regression import compare_samples
from rlbench.reports.load import RunView


@dataclass(frozen=True)
class AcrossView:
    x_of_fastest: dict[str, float] = field(default_factory=dict)  # run label -> median wall step / the fastest's
    lines: list[str] = field(default_factory=list)  # one verdict per run that is not its group's fastest


def _wall_steps(run: RunView):
    steady = run.steady_steps
    if steady is None or ACROSS_METRIC not in steady:
        return None
    values = steady[ACROSS_METRIC].dropna()
    return values if len(values) else None


def _group_key(run: RunView) -> str | None:
    digest = data_digest(run.record)
    if digest is None:  # compare refuses frameworks on data not shown to be the same; so does the report
        return None
    key = configuration_key(run.record)
    key.pop("framework")
    return json.dumps({**key, "data": digest}, sort_keys=True, default=str)


def across_frameworks(runs: list[RunView], threshold: float = 0.05) -> AcrossView:
    """Groups of succeeded runs of two or more frameworks on equal work, each against its fastest run."""
    groups: dict[str, list[RunView]] = {}
    wall = {}  # run label -> its post-warm-up wall step times, read once
    for run in runs:
        if run.record.get("status") != "succeeded" or (steps := _wall_steps(run)) is None:
            continue
        if (key := _group_key(run)) is not None:
            groups.setdefault(key, []).append(run)
            wall[run.label] = steps
    view = AcrossView()
    for members in groups.values():
        if len({run.record["framework"]["name"] for run in members}) < 2:
            continue
        fastest = min(members, key=lambda run: float(wall[run.label].median()))
        best = float(wall[fastest.label].median())
        for run in members:
            view.x_of_fastest[run.label] = float(wall[run.label].median()) / best if best > 0 else math.nan
            if run is fastest:
                continue
            found = compare_samples(wall[fastest.label], wall[run.label], direction="lower", threshold=threshold)
            line = across_verdict([(ACROSS_METRIC, found)], fastest.label, run.label).removeprefix("verdict: ")
            shared = [r.label for r in (fastest, run) if contention(r.record)]
            if shared:
                line += f" — not a fair comparison: {' and '.join(shared)} ran on a contended host"
            view.lines.append(line)
    return view
