"""The framework floor: fixed + per-decode-step for generation, fixed for the update, never negative."""

import pytest

from rlbench.harness.perfmodel.floor import measure_floor


def test_generation_floor_splits_fixed_and_per_token_update_is_fixed():
    floor = measure_floor(
        [
            (8, {"gen": 0.06, "update_actor": 0.13}, {"gen": 0.018, "update_actor": 0.032}),
            (16, {"gen": 0.10, "update_actor": 0.15}, {"gen": 0.031, "update_actor": 0.035}),
        ]
    )
    # gen excess 0.042 at L8, 0.069 at L16 -> 3.375 ms per token, 15 ms fixed
    assert floor.per_decode_step_s["gen"] == pytest.approx(0.003375)
    assert floor.seconds("gen", 32) == pytest.approx(0.015 + 32 * 0.003375)
    assert floor.seconds("update_actor", 32) == pytest.approx((0.098 + 0.115) / 2)
    assert floor.seconds("unknown", 32) == 0.0


def test_more_lengths_fit_a_least_squares_line():
    # excess 0.01 + 0.002 L, plus 0.02 at L 16 only: mean length 56/3, Sxx = sum((L - 56/3)^2)
    cells = [
        (length, {"gen": 0.01 + 0.002 * length + bump}, {"gen": 0.0}) for length, bump in ((8, 0), (16, 0.02), (32, 0))
    ]
    floor = measure_floor(cells)
    mean_len = 56 / 3
    sxx = sum((length - mean_len) ** 2 for length in (8, 16, 32))
    assert floor.per_decode_step_s["gen"] == pytest.approx(0.002 + 0.02 * (16 - mean_len) / sxx)
    assert floor.seconds("gen", mean_len) == pytest.approx(sum(m["gen"] for _, m, _ in cells) / 3)


def test_floor_is_clipped_at_zero_and_needs_two_lengths():
    floor = measure_floor(
        [(8, {"update_actor": 0.01}, {"update_actor": 0.05}), (16, {"update_actor": 0.02}, {"update_actor": 0.06})]
    )
    assert floor.seconds("update_actor", 8) == 0.0
    with pytest.raises(ValueError, match="two response lengths"):
        measure_floor([(8, {"update_actor": 0.1}, {"update_actor": 0.05})])


def test_predict_adds_the_floor_to_the_stages_that_pay_it():
    from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict
    from rlbench.harness.perfmodel.floor import FrameworkFloor

    work = WorkloadShape(prompts_per_step=8, group_size=4, prompt_len=128, response_len=256)
    floor = FrameworkFloor(
        fixed_s={"gen": 0.5, "update_actor": 2.0}, per_decode_step_s={"gen": 0.01}, source="test cells"
    )
    bare = predict("Qwen2.5-0.5B-Instruct", work, ParallelShape(gpus=1), "H100-SXM")
    with_floor = predict("Qwen2.5-0.5B-Instruct", work, ParallelShape(gpus=1), "H100-SXM", floor=floor)
    decode, update = with_floor.stage("generation_decode"), with_floor.stage("actor_update")
    assert decode.floor_s == pytest.approx(0.5 + 256 * 0.01)
    assert decode.time_s == pytest.approx(bare.stage("generation_decode").time_s + decode.floor_s)
    assert update.time_s == pytest.approx(bare.stage("actor_update").time_s + 2.0)
    assert with_floor.stage("reward").time_s == bare.stage("reward").time_s
    assert with_floor.step_time_s == pytest.approx(bare.step_time_s + 0.5 + 2.56 + 2.0)
    assert with_floor.brent_lower_s == pytest.approx(bare.brent_lower_s + 5.06)
    assert with_floor.mfu < bare.mfu
    assert any("test cells" in note for note in with_floor.notes)
    assert with_floor.to_dict()["stages"][1]["floor_s"] > 0
