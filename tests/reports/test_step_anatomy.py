"""The report's generation-tail and weight-sync table, and the weight-sync rate each run's steps now carry."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.run.derive import weight_sync_rate
from rlbench.reports.load import load_run
from rlbench.reports.step_anatomy import HEADERS, anatomy_rows

RECORD = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"


def test_weight_sync_rate_is_the_engine_shard_over_the_sync_time():
    steps = pd.DataFrame({"time_weight_sync_s": [0.5, 0.0, math.nan]})
    rate = weight_sync_rate(steps, {"memory_breakdown_gb": {"rollout_weights": 2.0}})
    assert rate.iloc[0] == 4.0 and rate.iloc[1:].isna().all()  # a zero or missing sync has no rate
    assert weight_sync_rate(steps, {}).isna().all()  # no prediction: no rate, never a guess


def test_the_table_gives_tail_and_sync_with_n_and_spread_and_dashes_where_not_logged():
    run = load_run(RECORD)
    steps = run.steps.copy()
    steps["response_length_max"] = [24.0, 32.0, 32.0]
    steps["response_length_mean"] = [12.0, 16.0, 16.0]
    steps["weight_sync_gb_per_s"] = [1.0, 2.0, 4.0]
    prediction = {**(run.prediction or {}), "weight_sync_bound_gb_per_s": 10.0}
    headers, rows = anatomy_rows([dataclasses.replace(run, steps=steps, prediction=prediction)])
    assert headers == HEADERS and len(rows) == 1
    row = dict(zip(headers, rows[0]))
    assert row["longest / mean"] == "2 ± 0 (n=2)"  # post-warm-up steps 2 and 3
    assert row["weight sync (GB/s per rollout GPU) ↑"].startswith("3 ± ") and row["share of the bound"] == "30.0%"
    assert row["clipped at the cap (share)"] == "–"  # not logged in this record
    # the median of a fitted log-normal is below the mean: the tail is decoded for more than longest - mean steps
    per_step = next(s for s in prediction["stages"] if s["name"] == "generation_decode")
    assert row["decoding the tail, estimated (s)"] != "–" and per_step


def test_equal_lengths_have_no_tail_to_decode():
    run = load_run(RECORD)
    steps = run.steps.copy()
    steps["response_length_max"] = steps["response_length_mean"]
    headers, rows = anatomy_rows([dataclasses.replace(run, steps=steps)])
    assert dict(zip(headers, rows[0]))["decoding the tail, estimated (s)"].startswith("0 ± 0")


def test_a_run_with_none_of_these_figures_has_no_row():
    run = load_run(RECORD)
    steps = run.steps.drop(columns=[c for c in ("response_length_mean",) if c in run.steps])
    assert anatomy_rows([dataclasses.replace(run, steps=steps, prediction={})])[1] == []


@pytest.mark.parametrize("value", [0.0, -1.0])
def test_a_non_positive_sync_time_gives_no_rate(value):
    steps = pd.DataFrame({"time_weight_sync_s": [value]})
    assert weight_sync_rate(steps, {"memory_breakdown_gb": {"rollout_weights": 1.0}}).isna().all()


def _row(run) -> dict[str, str]:
    headers, rows = anatomy_rows([run])
    return dict(zip(headers, rows[0]))


def test_a_tail_workloads_declared_lengths_and_measured_p90_are_shown_and_p50_places_the_tail():
    """The median a framework's responses measured (TRL's p50) replaces the fitted one in the tail estimate."""
    run = load_run(RECORD)
    steps = run.steps.assign(
        response_length_max=[40.0] * 3, response_length_mean=[16.0] * 3, response_length_p90=[30.0, 34.0, 38.0]
    )
    record = {**run.record, "response_lengths": {"declared": {"mean": 15.74, "p90": 36}}}
    tail = dataclasses.replace(run, steps=steps, record=record)
    row = _row(tail)
    assert row["p90 response (tokens)"] == "36 ± 2.8 (n=2)" and row["declared mean / p90 (tokens)"] == "15.7 / 36"
    fitted = row["decoding the tail, estimated (s)"]
    assert fitted != "–" and not fitted.startswith("0 ± 0")
    # every response as long as the longest: nothing is decoded alone
    at_p50 = dataclasses.replace(tail, steps=steps.assign(response_length_p50=[40.0, 40.0, 40.0]))
    assert _row(at_p50)["decoding the tail, estimated (s)"].startswith("0 ± 0")
