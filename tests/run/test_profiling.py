"""Runner-side profiling glue: alignment is skipped, not crashed, when a framework logs no step times."""

from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd

from rlbench.harness.run import profiling


def test_steps_without_wall_clock_bounds_keep_run_level_telemetry(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    handle = profiling.start(tmp_path, child.pid)
    child.wait()
    steps = pd.DataFrame(
        {
            "step": [1, 2],
            "step_time_s": [0.5, 0.5],
            "step_start_unix_s": [math.nan, math.nan],
            "step_end_unix_s": [math.nan, math.nan],
        }
    )
    joined, notes = profiling.add_telemetry(tmp_path, handle, steps)
    assert joined.equals(steps) and notes["aligned"] is False
    assert (tmp_path / profiling.TELEMETRY_FILE).is_file()


def test_costs_need_a_price_and_gpus():
    summary = {"total_tokens": {"mean": 1e6}, "step_time_s": {"mean": 3600.0}, "energy_j": {"mean": 3.6e6}}
    out = profiling.costs(summary, pd.DataFrame(), gpus=8, hardware_usd=2.0)
    assert out["cost_per_mtok_usd"] == 16.0 and out["energy_per_mtok_j"] == 3.6e6  # 8 GPU-hours x $2 per 1M tokens
    assert profiling.costs(summary, pd.DataFrame(), gpus=0, hardware_usd=2.0)["cost_per_mtok_usd"] is None
