"""One metric registry (record.schema.STEP_METRICS) feeds every headline list, and one Status type every state."""

from __future__ import annotations

import json

import pytest

from rlbench.nightly.gate import format_night
from rlbench.record.schema import STEP_METRICS, TERMINAL_STATUSES, Status, headline
from rlbench.reports.history import HISTORY_METRICS
from rlbench.reports.tables import summary_rows
from rlbench.sweep.spread import METRICS as SWEEP_METRICS


@pytest.mark.parametrize("view", ["report", "sweep", "history", "nightly"])
def test_every_headline_metric_has_a_title_unit_and_direction(view):
    names = headline(view)
    assert names, f"the {view} view shows no metric"
    for name in names:
        metric = STEP_METRICS[name]
        assert metric.title and metric.display_unit and metric.direction in ("higher", "lower")


def test_the_sweep_and_history_lists_are_the_registrys():
    assert SWEEP_METRICS == headline("sweep")
    assert HISTORY_METRICS == headline("history")


def test_the_report_table_has_one_column_per_report_metric_with_its_unit_and_arrow():
    headers, rows = summary_rows([])
    for name in headline("report"):
        metric = STEP_METRICS[name]
        arrow = {"higher": "↑", "lower": "↓"}[metric.direction]
        assert f"{metric.title} ({metric.display_unit}) {arrow}" in headers
    assert rows == []


def test_the_nightly_line_shows_exactly_the_nightly_metrics():
    comparisons = {name: {"ratio": 1.0, "verdict": "unchanged"} for name in STEP_METRICS}
    night = {
        "status": "passed",
        "benchmarks": [
            {
                "framework": "trl",
                "workload": "gsm8k-grpo-tiny",
                "parallel": [],
                "status": "succeeded",
                "baseline": "b",
                "regressed": [],
                "comparisons": comparisons,
            }
        ],
    }
    line = format_night(night).splitlines()[0]
    shown = [name for name in STEP_METRICS if f" {name} x1.000" in f" {line}" or f"({name} x1.000" in line]
    assert shown == list(headline("nightly"))


def test_a_status_is_its_string_on_disk_and_in_messages():
    assert json.loads(json.dumps({"status": Status.SUCCEEDED})) == {"status": "succeeded"}
    assert Status("interrupted") is Status.INTERRUPTED and "failed" == Status.FAILED
    assert f"{Status.REFUSED}" == "refused" and str(Status.ABANDONED) == "abandoned"
    assert set(TERMINAL_STATUSES) == {"succeeded", "failed", "interrupted"}
