"""A workload's quality target ends the run where it says so: rlbench stops the framework once the target holds
and the record is a success with the time to target; a run that never reaches it runs its steps and says so."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from rlbench.harness.record.read import read_record
from rlbench.workloads.catalog import WORKLOAD_DIR
from tests.run.test_faults_run import alive, finish, framework_pids, run_dir_of, start_run


def _target_workload(tmp_path: Path, value: float, stop: bool = True) -> Path:
    path = tmp_path / "with-target.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "include": str(WORKLOAD_DIR / "gsm8k-grpo-tiny.yaml"),
                "name": "with-target",
                "target": {"metric": "reward_mean", "value": value, "window": 2, "stop": stop},
            }
        )
    )
    return path


def _run(tmp_path: Path, workload: Path, mode: str, steps: int, total: int) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    process: subprocess.Popen = start_run(out, mode, steps=steps, total_steps=total, workload=str(workload))
    code, stderr = finish(process, timeout_s=300)
    return code, stderr, run_dir_of(out)


@pytest.fixture(scope="module", autouse=True)
def needs_trl():
    pytest.importorskip("trl")


def test_the_run_stops_once_the_target_holds(tmp_path):
    # the stand-in logs reward 0.25 each step, then hangs: only the target can end this run
    code, stderr, run_dir = _run(tmp_path, _target_workload(tmp_path, 0.25), "hang", steps=4, total=20)
    assert code == 0, stderr
    assert "target reached at step" in stderr
    record = read_record(run_dir)
    assert record["status"] == "succeeded" and record["error"] is None
    target = record["target"]
    assert target["reached"] and target["stopped_at_target"] and target["step"] == 2  # window 2: steps 1-2
    assert target["seconds"] > 0 and target["seconds_from_launch"] >= target["seconds"]
    assert not [pid for pid in framework_pids(run_dir) if alive(pid)]


def test_a_target_not_reached_runs_every_step_and_says_so(tmp_path):
    code, stderr, run_dir = _run(tmp_path, _target_workload(tmp_path, 0.5), "ok", steps=3, total=3)
    assert code == 0, stderr
    target = read_record(run_dir)["target"]
    assert not target["reached"] and not target["stopped_at_target"]
    assert target["steps_run"] == 3 and target["best_moving_mean"] == pytest.approx(0.25)
