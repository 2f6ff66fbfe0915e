"""The report's frameworks-on-equal-work view: "x of the fastest" and one verdict line per slower run, hand-checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rlbench.reports.across import across_frameworks
from rlbench.reports.load import RunView
from rlbench.reports.tables import summary_rows

WORKLOAD = {"name": "gsm8k-grpo-tiny", "version": 3, "steps": 9, "warmup_steps": 1}


def _run(framework: str, times: list[float], *, digest: str = "abc", label: str = "", other_cores: float = 0.0):
    steps = pd.DataFrame({"step": range(1, len(times) + 1), "wall_step_time_s": times})
    summary = {"cpu_util_mean_pct": {"median": 50.0 + other_cores * 50}, "proc_cpu_util_mean_pct": {"median": 100.0}}
    record = {
        "status": "succeeded",
        "framework": {"name": framework},
        "workload": WORKLOAD,
        "parallel": {"dp": 1},
        "data": {"sha256": digest},
        "environment": {"cpu_count": 2},
        "summary": summary,
    }
    return RunView(Path(f"/x/{label or framework}"), record, steps, None, None, None, label or framework)


def test_slower_frameworks_get_their_ratio_to_the_fastest_and_a_verdict():
    rng = np.random.default_rng(0)
    fast = [9.0, *(2.0 + 0.01 * rng.standard_normal(8))]
    slow = [9.0, *(3.0 + 0.01 * rng.standard_normal(8))]
    view = across_frameworks([_run("verl", slow), _run("openrlhf", fast)])
    assert view.x_of_fastest["openrlhf"] == 1.0
    assert abs(view.x_of_fastest["verl"] - np.median(slow[1:]) / np.median(fast[1:])) < 1e-12
    (line,) = view.lines
    assert line.startswith("verl is slower than openrlhf in wall step time (x1.49 [") and "n = 8/8" in line
    headers, rows = summary_rows([_run("verl", slow), _run("openrlhf", fast)], view.x_of_fastest)
    column = headers.index("step time, x of the fastest on equal work (ratio) ↓")
    assert [row[column] for row in rows] == [f"{view.x_of_fastest['verl']:.3g}", "1"]


def test_only_runs_on_equal_work_are_ranked_and_a_contended_one_is_named():
    a, b = [1.0] * 2 + [2.0, 2.1, 2.0, 2.2, 2.1], [1.0] * 2 + [2.0, 2.1, 2.0, 2.2, 2.1]
    assert across_frameworks([_run("verl", a), _run("trl", b, digest="other")]).lines == []  # other problems
    assert across_frameworks([_run("trl", a, label="x"), _run("trl", b, label="y")]).lines == []  # one framework
    (line,) = across_frameworks([_run("verl", a, other_cores=1.0), _run("trl", [1.0, 1.0, 1.1])]).lines
    assert "not a fair comparison: verl ran on a contended host" in line
    assert "not distinguishable (too few steps)" in line  # 6 steps vs 2: the test cannot reach p < 0.05
