"""One metric registry (record.schema.STEP_METRICS) feeds every headline list; a run, a sweep cell and a night each
have a status type of their own."""

from __future__ import annotations

import json
import typing

import pytest

from rlbench.harness.nightly.gate import format_night, night_status
from rlbench.harness.record.schema import STEP_METRICS, View, headline
from rlbench.harness.record.spread import METRICS as SWEEP_METRICS
from rlbench.harness.record.status import TERMINAL_STATUSES, CellStatus, NightStatus, RunStatus
from rlbench.reports.headline import RUN_METRICS
from rlbench.reports.history import HISTORY_METRICS
from rlbench.reports.repeats import POOLED_METRICS
from rlbench.reports.sweep_views import grid_rows
from rlbench.reports.tables import summary_rows


@pytest.mark.parametrize("view", typing.get_args(View))
def test_every_headline_metric_has_a_title_unit_and_direction(view):
    names = headline(view)
    assert names, f"the {view} view shows no metric"
    for name in names:
        metric = STEP_METRICS[name]
        assert metric.title and metric.display_unit and metric.direction in ("higher", "lower")


def test_the_sweep_and_history_lists_are_the_registrys():
    assert SWEEP_METRICS == headline("sweep")
    assert HISTORY_METRICS == headline("history")
    assert POOLED_METRICS == headline("sweep")  # repeats pool what a sweep's spread shows


def test_a_sweep_cell_row_shows_the_run_metrics_with_the_registrys_titles():
    class Sweep:
        index = {"cells": []}
        runs: dict = {}

    headers, _ = grid_rows(Sweep())
    arrows = {"higher": "↑", "lower": "↓"}
    shown = [f"{m.title} ({m.display_unit}) {arrows[m.direction]}" for m in map(STEP_METRICS.get, RUN_METRICS)]
    assert headers[-1 - len(shown) : -1] == shown


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
    assert json.loads(json.dumps({"status": RunStatus.SUCCEEDED})) == {"status": "succeeded"}
    assert RunStatus("interrupted") is RunStatus.INTERRUPTED and "failed" == RunStatus.FAILED
    assert f"{CellStatus.REFUSED}" == "refused" and str(RunStatus.ABANDONED) == "abandoned"
    assert set(TERMINAL_STATUSES) == {"succeeded", "failed", "interrupted"}


def test_a_run_a_cell_and_a_night_have_states_of_their_own():
    """A run is never refused or pending and a night is never pending: each state belongs to its thing's type."""
    runs, cells, nights = ({s.value for s in kind} for kind in (RunStatus, CellStatus, NightStatus))
    assert "refused" in cells and "refused" not in runs | nights
    assert "pending" in cells and "pending" not in runs | nights
    assert {"passed", "regressed", "undecidable", "not run"} <= nights and not {"passed", "regressed"} & (runs | cells)
    assert CellStatus.SUCCEEDED == RunStatus.SUCCEEDED  # the same word for the same state: a cell is its run's


def test_a_nights_status_is_a_status():
    succeeded = {"status": NightStatus.SUCCEEDED, "regressed": []}
    assert night_status([succeeded, {"status": "not run"}]) is NightStatus.FAILED
    assert night_status([{**succeeded, "undecidable": ["mfu"]}]) is NightStatus.UNDECIDABLE
