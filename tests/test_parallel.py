"""--parallel key=value parsing and validation."""

from __future__ import annotations

import pytest

from rlbench.errors import RLBenchError
from rlbench.run.parallel import Parallelism, parse_parallel


def test_parse_all_knobs():
    p = parse_parallel(["dp=8", "tp=2", "pp=1", "sp=2", "placement=disaggregated", "async=one-step"])
    assert (p.dp, p.tp, p.sp, p.placement, p.async_) == (8, 2, 2, "disaggregated", "one-step")
    assert p.world_size == 16
    assert p.non_default() == {"dp": 8, "tp": 2, "sp": 2, "placement": "disaggregated", "async": "one-step"}


def test_defaults_are_single_device_colocated_sync():
    assert parse_parallel([]) == Parallelism()
    assert Parallelism().non_default() == {}


@pytest.mark.parametrize("pair,message", [
    ("tpp=2", "unknown knob 'tpp'; did you mean 'tp'"),
    ("dp", "expected key=value"),
    ("dp=two", "dp must be a positive integer"),
    ("dp=0", "must be a positive integer"),
    ("placement=remote", "placement='remote': must be one of colocated, disaggregated"),
    ("async=yes", "must be one of off, one-step"),
])
def test_bad_knobs_are_refused(pair, message):
    with pytest.raises(RLBenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_parallel([pair])
