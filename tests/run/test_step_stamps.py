"""rlbench's own step-end stamps: one step-time definition for every framework, and verl's missing boundaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rlbench.harness.run.step_stamps import STAMPS_FILE, apply_stamps, note_seen, read_stamps


def test_wall_step_time_is_the_gap_between_stamps_and_stands_in_for_missing_boundaries(tmp_path):
    note_seen(tmp_path, [1], now=100.0)
    note_seen(tmp_path, [2, 3], now=103.5)  # two steps seen in one poll share its stamp
    note_seen(tmp_path, [2], now=200.0)  # a step is stamped once: the first sighting
    (tmp_path / STAMPS_FILE).open("a").write('{"step": 4, "seen_unix')  # cut by a crash
    assert read_stamps(tmp_path) == {1: 100.0, 2: 103.5, 3: 103.5}
    verl = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "step_time_s": [3.0, 3.2, 0.1],
            "step_start_unix_s": [math.nan] * 3,
            "step_end_unix_s": [math.nan] * 3,
        }
    )
    steps, note = apply_stamps(verl, tmp_path)
    assert steps["wall_step_time_s"].tolist()[1:] == [3.5, 0.0] and math.isnan(steps["wall_step_time_s"][0])
    assert steps["step_end_unix_s"].tolist() == [100.0, 103.5, 103.5]
    # step 3's 0.1 s would start before step 2's end (both seen by one poll): it starts at that end instead
    assert steps["step_start_unix_s"].tolist() == pytest.approx([97.0, 100.3, 103.5])
    from rlbench.harness.telemetry.windows import check_steps

    check_steps(steps)  # windows that do not overlap: per-step telemetry aligns to every step
    assert "arrival stamps" in note


def test_an_evaluation_before_the_steps_log_starts_its_window_earlier(tmp_path):
    """verl validates after its step timer and before its log: the stand-in start counts the evaluation in."""
    note_seen(tmp_path, [1], now=100.0)
    note_seen(tmp_path, [2], now=110.0)
    verl = pd.DataFrame(
        {"step": [1, 2], "step_time_s": [3.0, 3.0], "time_eval_s": [math.nan, 2.5], "step_end_unix_s": [math.nan] * 2}
    )
    steps, _ = apply_stamps(verl, tmp_path)
    assert steps["step_start_unix_s"].tolist() == pytest.approx([97.0, 104.5])


def test_a_framework_with_its_own_boundaries_keeps_them(tmp_path):
    note_seen(tmp_path, [1, 2], now=50.0)
    trl = pd.DataFrame(
        {"step": [1, 2], "step_time_s": [1.0, 1.0], "step_start_unix_s": [48.0, 49.0], "step_end_unix_s": [49.0, 50.0]}
    )
    steps, note = apply_stamps(trl, tmp_path)
    assert note is None and steps["step_end_unix_s"].tolist() == [49.0, 50.0]
    assert steps["step_seen_unix_s"].tolist() == [50.0, 50.0]
    assert steps["wall_step_time_s"].tolist()[1:] == [1.0]  # the writer's stamps, not the shared arrival


def test_event_wall_times_not_delayed_arrivals_define_openrlhf_wall_step_time(tmp_path):
    """TensorBoard flushes in batches: steps 1-3 appear on disk together, long after they were logged."""
    note_seen(tmp_path, [1, 2, 3], now=130.0)
    note_seen(tmp_path, [4], now=150.0)
    openrlhf = pd.DataFrame(
        {
            "step": [1, 2, 3, 4],
            "step_time_s": [2.0, 2.1, 2.2, 2.3],  # OpenRLHF's own figure: the sum of its stage timers
            "step_start_unix_s": [98.0, 100.0, 102.6, 105.3],
            "step_end_unix_s": [100.0, 102.6, 105.3, 108.0],  # the events' wall times
        }
    )
    steps, note = apply_stamps(openrlhf, tmp_path)
    assert note is None
    assert steps["wall_step_time_s"].tolist()[1:] == pytest.approx([2.6, 2.7, 2.7])
    assert steps["step_seen_unix_s"].tolist() == [130.0, 130.0, 130.0, 150.0]


def test_no_stamps_no_change(tmp_path):
    verl = pd.DataFrame({"step": [1], "step_time_s": [3.0], "step_end_unix_s": [math.nan]})
    steps, note = apply_stamps(verl, tmp_path)
    assert note is None and math.isnan(steps["step_end_unix_s"][0]) and math.isnan(steps["step_seen_unix_s"][0])
