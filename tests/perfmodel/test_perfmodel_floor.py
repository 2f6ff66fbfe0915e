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


def test_every_logged_column_gets_its_terms_and_a_slope_only_where_the_spread_supports_it():
    # old_log_prob: 0.1 s + 4 ms/token, medians known to 1 ms; weight_sync the same rise (no slope: it moves the same
    # bytes at any length); update_actor: 0.2 s with +-5 ms wobble known only to 10 ms (no slope); other: 0.3 s
    # outside the stages; ref logged by one cell only; reward by none.
    cells = []
    for length, wobble in ((8, 0.005), (16, -0.005), (32, 0.005)):
        measured = {
            "gen": 0.05 + 0.002 * length,
            "old_log_prob": 0.1 + 0.004 * length + 0.01,
            "weight_sync": 0.1 + 0.004 * length,
            "update_actor": 0.2 + wobble + 0.05,
            "other": 0.3,
        }
        predicted = {"gen": 0.0, "old_log_prob": 0.01, "weight_sync": 0.0, "update_actor": 0.05, "other": 0.0}
        errors = {"gen": 0.001, "old_log_prob": 0.001, "weight_sync": 0.001, "update_actor": 0.01, "other": 0.002}
        if length == 8:
            measured["ref"], predicted["ref"], errors["ref"] = 0.5, 0.0, 0.001
        cells.append((length, measured, predicted, errors))
    floor = measure_floor(cells)
    assert floor.per_decode_step_s["old_log_prob"] == pytest.approx(0.004)
    assert floor.fixed_s["old_log_prob"] == pytest.approx(0.1)
    assert "weight_sync" not in floor.per_decode_step_s
    assert floor.fixed_s["weight_sync"] == pytest.approx(0.1 + 0.004 * 56 / 3)
    assert "update_actor" not in floor.per_decode_step_s
    assert floor.fixed_s["update_actor"] == pytest.approx(0.2 + 0.005 / 3)
    assert floor.fixed_s["other"] == pytest.approx(0.3) and "other" not in floor.per_decode_step_s
    assert floor.per_decode_step_s["gen"] == pytest.approx(0.002) and floor.fixed_s["gen"] == pytest.approx(0.05)
    # a column not logged in every cell is not fitted: it adds nothing
    assert "ref" not in floor.fixed_s and "reward" not in floor.fixed_s and floor.seconds("ref", 64) == 0.0
    assert floor.to_dict()["pays"] == {
        "gen": "generation_decode",
        "old_log_prob": "old_logprob",
        "other": "unstaged",
        "update_actor": "actor_update",
        "weight_sync": "weight_sync",
    }
    # the same rise with a spread 10x wider is within the noise: fixed only
    noisy = [(length, m, p, {**e, "old_log_prob": 0.05}) for length, m, p, e in cells]
    assert "old_log_prob" not in measure_floor(noisy).per_decode_step_s


def test_predict_applies_every_columns_floor_to_the_stage_that_pays_it():
    from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict
    from rlbench.harness.perfmodel.floor import MODEL_STAGE, UNSTAGED, FrameworkFloor

    work = WorkloadShape(prompts_per_step=8, group_size=4, prompt_len=128, response_len=256)
    fixed = {column: 0.01 * (i + 1) for i, column in enumerate(MODEL_STAGE)}
    floor = FrameworkFloor(fixed_s=fixed, per_decode_step_s={"gen": 0.001, "weight_sync": 0.0005}, source="cells")
    bare = predict("Qwen2.5-0.5B-Instruct", work, ParallelShape(gpus=1), "H100-SXM")
    floored = predict("Qwen2.5-0.5B-Instruct", work, ParallelShape(gpus=1), "H100-SXM", floor=floor)
    for column, name in MODEL_STAGE.items():
        assert floored.stage(name).floor_s == pytest.approx(floor.seconds(column, 256)), column
    unstaged = floored.stage(UNSTAGED)
    assert unstaged.time_s == pytest.approx(fixed["other"]) and unstaged.gpus == 0
    added = sum(floor.seconds(column, 256) for column in MODEL_STAGE)
    assert floored.step_time_s == pytest.approx(bare.step_time_s + added)
    assert floored.group_times_s["sync"] == pytest.approx(
        bare.group_times_s["sync"] + floor.seconds("weight_sync", 256) + fixed["other"]
    )
    # no unstaged time measured: no stage for it, and the step is as before plus the stages' floors
    only_gen = predict(
        "Qwen2.5-0.5B-Instruct",
        work,
        ParallelShape(gpus=1),
        "H100-SXM",
        floor=FrameworkFloor(fixed_s={"gen": 0.5}, per_decode_step_s={}),
    )
    assert UNSTAGED not in {s.name for s in only_gen.stages}
    assert only_gen.step_time_s == pytest.approx(bare.step_time_s + 0.5)
