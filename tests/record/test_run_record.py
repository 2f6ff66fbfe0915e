"""run.json's one module: the builder the run's phases fill, the field it adds (response_lengths) read back
checked, and the slim record a full disk leaves."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rlbench.harness.record.read import DamagedRecord, read_record
from rlbench.harness.record.run_record import LARGE_FIELDS, RecordBuilder, RunRecord
from rlbench.harness.record.status import RunStatus
from rlbench.harness.run.derive import response_lengths
from rlbench.workloads.catalog import load_workload


def _start(**extra) -> RunRecord:
    return RunRecord(  # type: ignore[typeddict-item]
        run_id="r",
        status=RunStatus.RUNNING,
        error=None,
        framework={"name": "trl", "version": "1", "tested": True},
        workload={"name": "w", "warmup_steps": 0},
        parallel={},
        seed=0,
        timeout_s=1.0,
        model_path="m",
        data=None,
        cpu_lane=None,
        equal_work=None,
        command=["x"],
        rlbench={},
        runner={"host": "h", "pid": 1, "pid_started_unix_s": 0.0, "heartbeat_s": 30.0},
        environment={},
        started_at="2026-12-07T00:00:00+00:00",
        ended_at=None,
        **extra,
    )


def _measured(builder: RecordBuilder, lengths) -> None:
    builder.measured(
        steps_recorded=2,
        summary={},
        telemetry={},
        comm=None,
        equal_work=None,
        time_to_first_step_s=None,
        response_lengths=lengths,
    )


def test_response_lengths_are_each_steps_as_the_framework_logged_them():
    workload = load_workload("gsm8k-grpo-tiny")
    steps = pd.DataFrame(
        {
            "step": [2, 1],
            "response_length_mean": [20.5, 12.0],
            "response_length_max": [32.0, float("nan")],  # a framework that does not log the longest
            "response_clipped_fraction": [0.25, 0.0],
        }
    )
    lengths = response_lengths(steps, workload)
    assert lengths == {
        "cap": workload.max_response_length,
        "fixed_length": workload.fixed_length,
        "declared": None,
        "steps": [
            {"step": 1, "mean": 12.0, "max": None, "p50": None, "p90": None, "p99": None, "clipped_share": 0.0},
            {"step": 2, "mean": 20.5, "max": 32.0, "p50": None, "p90": None, "p99": None, "clipped_share": 0.25},
        ],
        "n": 2,
    }
    assert response_lengths(pd.DataFrame(), workload) is None


def test_a_field_the_builder_adds_is_written_and_read_back_checked(tmp_path):
    builder = RecordBuilder(_start())
    lengths = {"cap": 32, "fixed_length": False, "steps": [{"step": 1, "mean": 9.0, "max": 32.0}], "n": 1}
    _measured(builder, lengths)
    builder.ended(
        status=RunStatus.SUCCEEDED, error=None, returncode=0, duration_s=1.0, ended_at="t", files=["run.json"]
    )
    builder.write_end(tmp_path)
    record = read_record(tmp_path)
    assert record["response_lengths"] == lengths and record["status"] == "succeeded"
    assert "record_errors" not in record and "profile" not in record  # optional fields not given stay absent

    raw = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**raw, "response_lengths": {"steps": "not a list"}}))
    with pytest.raises(DamagedRecord, match="response_lengths.steps is not a list of mappings"):
        read_record(tmp_path)


def test_a_full_disk_leaves_a_slim_failed_record(tmp_path, monkeypatch):
    """The atomic write has no room for its second copy: the running run.json is overwritten in place, without
    the large fields, and a run that had succeeded says why it is now failed."""
    import rlbench.harness.record.run_record as run_record

    builder = RecordBuilder(_start())
    builder.write(tmp_path)  # the running record the slim one overwrites
    _measured(builder, {"cap": 32, "fixed_length": True, "steps": [], "n": 0})
    builder.ended(status=RunStatus.SUCCEEDED, error=None, returncode=0, duration_s=1.0, ended_at="t", files=[])

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_record, "write_json", full)
    builder.write_end(tmp_path)
    raw = json.loads((tmp_path / "run.json").read_text())
    assert raw["status"] == "failed" and raw["error"]["kind"] == "record_error"
    assert "No space left on device" in raw["error"]["message"]
    assert not set(LARGE_FIELDS) & set(raw)
