"""`rlbench predict --lengths` and `--lengths-from RUN`: the response lengths priced, given or fitted to what a
framework logged (its longest response, or its clipped share), and bad input refused in one line."""

from __future__ import annotations

import pandas as pd
import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import WorkloadShape
from rlbench.harness.perfmodel.lengths import ResponseLengths
from rlbench.harness.predict.response_lengths import lengths_from_record, parse_lengths, with_lengths


def test_lengths_on_the_command_line() -> None:
    lengths = parse_lengths("mean=1500, p99=6000", cap=8192)
    assert (lengths.mean, lengths.tail, lengths.tail_quantile, lengths.cap) == (1500, 6000, 0.99, 8192)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mean=1500", "exactly one of p90"),
        ("mean=1500,p90=2000,p99=3000", "exactly one of p90"),
        ("median=1500,p90=2000", "give mean=TOKENS"),
        ("mean=nan,p90=2000", "must be a positive number"),
        ("mean=1500,p90=1000", "must exceed the mean"),
        ("mean=9000,p90=9500", "must be in"),
    ],
)
def test_bad_lengths_are_one_line(text, message) -> None:
    with pytest.raises(RLBenchError, match=message):
        parse_lengths(text, cap=8192)


def _steps(**columns) -> pd.DataFrame:
    return pd.DataFrame({"step": [1, 2, 3, 4], **columns})


def test_a_tail_fitted_to_the_logged_longest_response_reproduces_it() -> None:
    truth = ResponseLengths(mean=800, tail=1500, cap=4096)
    longest = truth.expected_longest(512)
    steps = _steps(
        response_length_mean=[400.0, 800.0, 790.0, 810.0],  # step 1 is warm-up, left out
        response_length_max=[900.0, longest, longest, longest],
        num_responses=[512.0] * 4,
    )
    fitted, mean = lengths_from_record(steps, warmup_steps=1, cap=4096, run="r")
    assert mean == 800 and fitted.tail == pytest.approx(1500, rel=0.02)
    assert fitted.expected_longest(512) == pytest.approx(longest, rel=0.01)


def test_a_tail_fitted_to_the_clipped_share_where_the_longest_is_not_logged() -> None:
    """OpenRLHF logs the mean and the truncated share, not the longest."""
    truth = ResponseLengths(mean=800, tail=1700, cap=2048)
    steps = _steps(
        response_length_mean=[800.0] * 4,
        response_length_max=[float("nan")] * 4,
        response_clipped_fraction=[truth.clipped_fraction] * 4,
    )
    fitted, _ = lengths_from_record(steps, warmup_steps=0, cap=2048, run="r")
    assert fitted.tail == pytest.approx(1700, rel=0.02)


def test_equal_lengths_have_no_tail_and_price_every_response_at_the_mean() -> None:
    at_cap = _steps(response_length_mean=[32.0] * 4, response_length_max=[32.0] * 4, num_responses=[8.0] * 4)
    assert lengths_from_record(at_cap, warmup_steps=1, cap=32, run="r") == (None, 32.0)
    shape = WorkloadShape(prompts_per_step=8, prompt_len=64, response_len=1024)
    assert with_lengths(shape, None, 300.0).response_len == 300 and with_lengths(shape, None, None) == shape
    with pytest.raises(RLBenchError, match="log no response length"):
        lengths_from_record(_steps(response_length_mean=[float("nan")] * 4), warmup_steps=0, cap=32, run="r")
    with pytest.raises(RLBenchError, match="neither the longest response nor the clipped share"):
        lengths_from_record(_steps(response_length_mean=[20.0] * 4), warmup_steps=0, cap=32, run="r")


@pytest.mark.parametrize(
    ("columns", "what"),
    [
        ({"response_length_mean": [-5.0] * 4}, "its mean response length, -5 tokens, is not in \\(0, 32\\]"),
        ({"response_length_mean": [0.0] * 4}, "its mean response length, 0 tokens"),
        ({"response_length_mean": [500.0] * 4}, "its mean response length, 500 tokens"),
        (
            {"response_length_mean": [20.0] * 4, "response_length_max": [1e9] * 4, "num_responses": [8.0] * 4},
            "its longest response length, 1e\\+09 tokens",
        ),
    ],
)
def test_a_record_whose_lengths_no_run_generates_is_refused_in_one_line(columns, what) -> None:
    """A damaged record's lengths (negative, zero, past the run's cap) were a ValueError from the fit."""
    with pytest.raises(RLBenchError, match=what + ".*the record is damaged"):
        lengths_from_record(_steps(**columns), warmup_steps=0, cap=32, run="r")
