"""Repeats pooled as runs: spread across runs beside spread across steps, one configuration per row."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from rlbench.reports.load import RunView
from rlbench.reports.repeats import pooled, pooled_rows


def _view(name: str, step_time: float, step_std: float, *, steps: int = 8, seed: int = 0, tp: int = 1) -> RunView:
    record = {
        "status": "succeeded",
        "seed": seed,
        "framework": {"name": "trl"},
        "parallel": {"dp": 1, "tp": tp},
        "workload": {"name": "gsm8k-grpo-tiny", "version": 1, "steps": steps, "warmup_steps": 1},
        "summary": {
            "wall_step_time_s": {"median": step_time, "std": step_std, "n": steps - 1},
            "tokens_per_s": {"median": 1000 / step_time, "std": 1.0, "n": steps - 1},
        },
    }
    return RunView(Path(name), record, None, None, None, None, name)


def test_repeats_are_pooled_and_other_configurations_are_not():
    runs = [
        _view("a", 1.0, 0.01),
        _view("b", 1.2, 0.02, seed=1),
        _view("c", 1.1, 0.03, seed=2),
        _view("d", 1.0, 0.01, steps=20),
        _view("e", 0.5, 0.01, tp=2),
    ]  # other steps, other tp: alone
    ((group, stats),) = pooled(runs)
    assert [r.path.name for r in group] == ["a", "b", "c"]
    step = stats["wall_step_time_s"]
    assert step["n"] == 3 and step["median"] == pytest.approx(1.1)
    assert step["std"] == pytest.approx(statistics.stdev([1.0, 1.2, 1.1]))  # across runs: 0.1
    assert step["within_run_std"] == pytest.approx(0.02)  # across steps: five times smaller here
    headers, rows = pooled_rows(runs)
    (row,) = rows
    assert row[1:4] == ["3", "1.1 ± 0.1 (n=3 runs)", "0.02"]
    assert "seed" not in row[0] and "8 steps" in row[0] and "std across runs" in headers[2]


def test_a_single_run_is_not_a_pool():
    assert pooled([_view("a", 1.0, 0.01)]) == []
