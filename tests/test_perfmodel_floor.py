"""The framework floor: fixed + per-decode-step for generation, fixed for the update, never negative."""

import pytest

from rlbench.perfmodel.floor import measure_floor


def test_generation_floor_splits_fixed_and_per_token_update_is_fixed():
    floor = measure_floor([(8, {"gen": 0.06, "update": 0.13}, {"gen": 0.018, "update": 0.032}),
                           (16, {"gen": 0.10, "update": 0.15}, {"gen": 0.031, "update": 0.035})])
    # gen excess 0.042 at L8, 0.069 at L16 -> 3.375 ms per token, 15 ms fixed
    assert floor.per_decode_step_s["gen"] == pytest.approx(0.003375)
    assert floor.seconds("gen", 32) == pytest.approx(0.015 + 32 * 0.003375)
    assert floor.seconds("update", 32) == pytest.approx((0.098 + 0.115) / 2)
    assert floor.seconds("unknown", 32) == 0.0


def test_floor_is_clipped_at_zero_and_needs_two_lengths():
    floor = measure_floor([(8, {"update": 0.01}, {"update": 0.05}), (16, {"update": 0.02}, {"update": 0.06})])
    assert floor.seconds("update", 8) == 0.0
    with pytest.raises(ValueError, match="two response lengths"):
        measure_floor([(8, {"update": 0.1}, {"update": 0.05})])
