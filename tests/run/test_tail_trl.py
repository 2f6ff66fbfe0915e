"""A length tail, run for real: TRL's own trainer on the tail workload, whose tiny model ends each token with a
declared probability. The record holds the lengths TRL generated, beside the distribution the workload declares;
the prediction prices the tokens generated, not the cap; equal_work says the lengths were sampled."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlbench.harness.record.read import read_record
from rlbench.workloads.catalog import load_workload
from rlbench.workloads.tail import declared_lengths
from tests.conftest import run_cli

pytest.importorskip("trl")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tail_run(tmp_path_factory, model_cache) -> Path:
    out = tmp_path_factory.mktemp("results")
    result = run_cli(
        "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny-tail", "--steps", "2", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip().splitlines()[-1])


def test_the_record_holds_the_tail_trl_generated(tail_run):
    record = read_record(tail_run)
    lengths = record["response_lengths"]
    declared = declared_lengths(load_workload("gsm8k-grpo-tiny-tail"))
    assert lengths["declared"] == pytest.approx(declared) and lengths["fixed_length"] is False
    raw = [json.loads(line) for line in (tail_run / "framework_metrics.jsonl").read_text().splitlines()]
    logged = [line["trl"] for line in raw if "step" in line and "eval" not in line]
    assert [row["mean"] for row in lengths["steps"]] == pytest.approx([t["completions/mean_length"] for t in logged])
    for row in lengths["steps"]:  # quantiles from each response TRL generated, nearest rank
        assert 1 <= row["p50"] <= row["p90"] <= row["p99"] <= row["max"] <= declared["cap"], row
    # 64 responses of a geometric with mean 15.7 (sd about 14, the cap's clipping included): their mean is within
    # 5 standard errors (1.75 each) of the declared one unless something other than the declared distribution
    # drew them; chance alone fails this less than once in a million runs.
    steps = record["steps"]
    pooled = float(steps["response_tokens"].sum() / steps["num_responses"].sum())
    assert abs(pooled - declared["mean"]) < 5 * 14 / math.sqrt(64), pooled
    clipped = float((steps["response_clipped_fraction"] * steps["num_responses"]).sum() / steps["num_responses"].sum())
    assert clipped < 0.25  # 1.6% declared; a model that ignored its end probability would clip every response


def test_the_prediction_prices_the_tokens_generated(tail_run):
    inputs = json.loads((tail_run / "prediction.json").read_text())["inputs"]
    steps = read_record(tail_run)["steps"]
    measured = float((steps["response_tokens"] / steps["num_responses"]).median())
    assert inputs["mean_response_len"] == pytest.approx(min(measured, inputs["response_len"]))
    assert inputs["response_len"] <= 64


def test_equal_work_says_the_lengths_were_sampled(tail_run):
    statement = read_record(tail_run)["equal_work"]["lengths"]
    assert statement.startswith("sampled to the end of text from one declared distribution")
    assert "end_probability 0.0625" in statement


def test_length_quantiles_are_lengths_some_response_had():
    from rlbench.adapters.trl.metrics import length_quantiles

    assert length_quantiles(list(range(1, 101))) == {
        "response_length_p50": 50.0,
        "response_length_p90": 90.0,
        "response_length_p99": 99.0,
    }
    assert length_quantiles([7]) == {f"response_length_p{q}": 7.0 for q in (50, 90, 99)}
    assert length_quantiles([]) == {}
