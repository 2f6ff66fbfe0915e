"""Response lengths as a distribution: the tail sets a synchronous step's decode depth, which more GPUs do not
shorten, and asynchrony pays off where that tail is long (synthetic distributions, the model's own figures)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict
from rlbench.harness.perfmodel.lengths import ResponseLengths

MODEL = "Qwen2.5-7B-Instruct"


def test_the_expected_longest_matches_sampling_and_grows_with_the_tail_and_the_batch() -> None:
    lengths = ResponseLengths(mean=1000, tail=2200, tail_quantile=0.9, cap=8192)
    rng = random.Random(0)

    def draw() -> float:
        return min(lengths.cap, rng.lognormvariate(lengths.mu, lengths.sigma))

    sampled = sum(max(draw() for _ in range(256)) for _ in range(400)) / 400
    assert lengths.expected_longest(256) == pytest.approx(sampled, rel=0.03)
    assert lengths.expected_longest(1) == pytest.approx(sum(draw() for _ in range(20000)) / 20000, rel=0.03)
    by_batch = [lengths.expected_longest(n) for n in (1, 8, 64, 512)]
    assert by_batch == sorted(by_batch) and by_batch[-1] <= lengths.cap
    thin = ResponseLengths(mean=1000, tail=1300, cap=8192)
    assert thin.expected_longest(256) < lengths.expected_longest(256)
    assert lengths.live_after(0, 100) == 100 and lengths.live_after(lengths.cap, 100) == 0
    assert 0 < lengths.clipped_fraction < 0.05


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mean": 1000, "tail": 900}, "must exceed the mean"),
        ({"mean": 1000, "tail": 5000}, "give the p99"),
        ({"mean": 9000, "tail": 9500}, r"mean=9000: must be in \(0, cap=8192\]"),
        ({"mean": 1000, "tail": 2000, "tail_quantile": 0.5}, "must be 0.9"),
        ({"mean": float("nan"), "tail": 2000}, "finite"),
    ],
)
def test_an_impossible_distribution_is_refused_with_the_reason(fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        ResponseLengths(**{"cap": 8192, **fields})


def test_a_workload_tail_needs_a_mean_and_is_checked() -> None:
    base = {"prompts_per_step": 8, "prompt_len": 64, "response_len": 4096}
    with pytest.raises(ValueError, match="response_tail_len: needs fixed_length=False"):
        WorkloadShape(**base, response_tail_len=2000)
    with pytest.raises(ValueError, match="WorkloadShape.response_tail_len: .*must exceed the mean"):
        WorkloadShape(**base, fixed_length=False, mean_response_len=1000, response_tail_len=800)
    shape = WorkloadShape(**base, fixed_length=False, mean_response_len=1000, response_tail_len=2000)
    assert shape.longest_response(1) < shape.longest_response(64) <= 4096
    assert WorkloadShape(**base).longest_response(64) == 4096  # no distribution: every batch reaches the cap


def _shape(**changes) -> WorkloadShape:
    base = WorkloadShape(
        prompts_per_step=64,
        group_size=8,
        prompt_len=512,
        response_len=8192,
        fixed_length=False,
        mean_response_len=1500,
        engine_max_seqs=256,
        engine_memory_fraction=0.6,
    )
    return replace(base, **changes)


def _decode_s(shape: WorkloadShape, parallel: ParallelShape) -> float:
    prediction = predict(MODEL, shape, parallel, "H100-SXM")
    return next(s.time_s for s in prediction.estimate_stages if s.name == "generation_decode")


def test_generation_time_grows_with_the_tail_at_a_fixed_mean() -> None:
    layout = ParallelShape(gpus=16)
    times = [_decode_s(_shape(response_tail_len=tail), layout) for tail in (1700, 2200, 3000)]
    assert times == sorted(times) and times[-1] > 1.5 * times[0]
    # the bound follows the same depth
    bounds = [
        predict(MODEL, _shape(response_tail_len=tail), layout, "H100-SXM").stage("generation_decode").time_s
        for tail in (1700, 3000)
    ]
    assert bounds[0] < bounds[1]


def test_strong_scaling_saturates_once_the_tail_dominates() -> None:
    """A synchronous step waits for the longest response of the whole batch at a per-step time that more
    engines do not cut: doubling 64 to 128 GPUs buys little once that depth dominates."""
    long_tail = _shape(response_tail_len=3300)
    steps = {g: predict(MODEL, long_tail, ParallelShape(gpus=g), "H100-SXM").step_time_estimate_s for g in (64, 128)}
    assert steps[64] / steps[128] < 1.1
    assert _decode_s(long_tail, ParallelShape(gpus=128)) > 0.9 * _decode_s(long_tail, ParallelShape(gpus=64))
    # generation's depth term (Brent's D) is the same on both and below the decode estimate: its floor
    depth = {
        g: predict(MODEL, long_tail, ParallelShape(gpus=g), "H100-SXM").estimate_terms["generation_depth_s"]
        for g in (64, 128)
    }
    assert depth[64] == depth[128] and depth[128] <= _decode_s(long_tail, ParallelShape(gpus=128))
    # the trainer's share halves as it should: the saturation is the depth's, not everything's
    train = {
        g: predict(MODEL, long_tail, ParallelShape(gpus=g), "H100-SXM").group_times_s["training"] for g in (64, 128)
    }
    assert train[64] / train[128] > 1.6


def test_one_step_off_wins_with_a_long_tail_and_not_with_equal_lengths() -> None:
    """Sixteen GPUs synchronous and colocated, or split 8 + 8 with generation one step ahead: with equal
    lengths the split halves each side's GPUs for nothing; with a long tail the synchronous step's GPUs
    wait out the stragglers while one-step-off trains beside them. Partial rollout stops waiting at all."""
    base = _shape(prompts_per_step=256, group_size=16, response_len=16384, mean_response_len=500)
    equal = replace(base, fixed_length=True, mean_response_len=None, response_len=500)
    long_tail = replace(base, response_tail_len=3000, response_tail_quantile=0.99)
    sync = ParallelShape(gpus=16)
    one_step = ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=8, async_mode="one-step")
    partial = replace(one_step, partial_rollout=True)

    def step(shape: WorkloadShape, layout: ParallelShape) -> float:
        return predict(MODEL, shape, layout, "H100-SXM").step_time_estimate_s

    assert step(equal, sync) < step(equal, one_step)
    assert step(long_tail, one_step) < step(long_tail, sync)
    assert step(long_tail, partial) <= step(long_tail, one_step)
    assert _decode_s(long_tail, partial) < 0.5 * _decode_s(long_tail, one_step)  # no wait for the tail


def test_partial_rollout_needs_an_asynchronous_pool_of_its_own() -> None:
    with pytest.raises(ValueError, match="partial_rollout: needs placement='disaggregated'"):
        ParallelShape(gpus=16, partial_rollout=True)
    with pytest.raises(ValueError, match="async_mode one-step or k-step"):
        ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=8, partial_rollout=True)
