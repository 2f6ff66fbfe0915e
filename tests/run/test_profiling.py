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


class _Stopped:
    """A sampler handle whose sampler already wrote `path` (a cluster's agents, or a test's table)."""

    def __init__(self, path):
        self.path = path

    def stop(self):
        return self.path

    def notes(self):
        return {"rate_hz": 1.0}


def _two_node_parquet(path, node1_util: float = 2.0):
    rows = []
    for t in (0.0, 1.0, 2.0, 3.0):
        rows.append({"time_unix_s": t, "node": "driver", "host": "a", "source": "host", "device": -1})
        for node, host, util in (("node0", "a", 90.0), ("node1", "b", node1_util)):
            common = {"time_unix_s": t, "node": node, "host": host}
            rows.append({**common, "source": "host", "device": -1, "proc_cpu_util_pct": 100.0})
            rows.append({**common, "source": "gpu", "device": 0, "gpu_util_pct": util})
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_a_multi_node_run_notes_each_node_and_the_idle_one(tmp_path):
    import json

    path = _two_node_parquet(tmp_path / profiling.TELEMETRY_FILE)
    steps = pd.DataFrame({"step": [1], "step_start_unix_s": [0.5], "step_end_unix_s": [2.5]})
    joined, notes = profiling.add_telemetry(tmp_path, _Stopped(path), steps)
    assert joined["gpu_util_mean_pct"].tolist() == [46.0]  # (90 + 2) / 2 over both nodes' GPU 0
    assert [n["node"] for n in notes["nodes"]] == ["driver", "node0", "node1"] and notes["rate_hz"] == 1.0
    assert notes["nodes"][0]["gpu_util_mean_pct"] is None and notes["nodes"][1]["gpus"] == 1  # NaN -> null
    (idle,) = notes["idle_nodes"]
    assert idle["node"] == "node1" and idle["busiest_node"] == "node0"
    json.dumps(notes, allow_nan=False)  # run.json holds no NaN
    # without aligned steps, the nodes are still noted (overlapping windows too: the error is named beside them)
    overlapping = pd.DataFrame({"step": [1, 2], "step_start_unix_s": [0.5, 1.0], "step_end_unix_s": [2.0, 2.5]})
    _, notes = profiling.add_telemetry(tmp_path, _Stopped(path), overlapping)
    assert "starts before the previous step ends" in notes["error"] and len(notes["nodes"]) == 3
    for unaligned in (pd.DataFrame(), steps.assign(step_start_unix_s=math.nan)):
        _, notes = profiling.add_telemetry(tmp_path, _Stopped(path), unaligned)
        assert len(notes["nodes"]) == 3 and len(notes["idle_nodes"]) == 1


def test_one_node_adds_no_node_notes_and_a_damaged_file_does_not_raise(tmp_path):
    path = tmp_path / profiling.TELEMETRY_FILE
    pd.DataFrame({"time_unix_s": [0.0], "host": ["a"], "source": ["host"], "device": [-1]}).to_parquet(path)
    _, notes = profiling.add_telemetry(tmp_path, _Stopped(path), pd.DataFrame())
    assert notes == {"rate_hz": 1.0}
    path.write_bytes(b"PAR1 not a parquet file")
    steps = pd.DataFrame({"step": [1], "step_start_unix_s": [0.5], "step_end_unix_s": [2.5]})
    for table in (pd.DataFrame(), steps):
        joined, notes = profiling.add_telemetry(tmp_path, _Stopped(path), table)
        assert joined.equals(table) and notes["error"].startswith(profiling.TELEMETRY_FILE)
