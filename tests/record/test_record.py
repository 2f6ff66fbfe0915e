"""Run records: unique folders, atomic files, the run.json type, the reader's migration, summaries without warm-up."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from rlbench.harness.atomic import write_bytes
from rlbench.harness.record.read import DamagedRecord, read_record, read_run_json, read_steps
from rlbench.harness.record.run_record import (
    FIELD_CHECKS,
    RUN_FIELDS,
    SCHEMA_VERSION,
    SchemaError,
    migrate,
    write_run_json,
)
from rlbench.harness.record.schema import STEP_METRICS
from rlbench.harness.record.store import new_run_dir, summarize, write_steps
from tests.conftest import GOLDEN_RECORDS

GOLDEN = GOLDEN_RECORDS / "trl-tiny"  # a real record of schema version 1, kept as it was written


def test_run_dirs_are_unique(tmp_path):
    dirs = {new_run_dir(tmp_path, "trl", "w") for _ in range(20)}
    assert len(dirs) == 20 and all(d.is_dir() and d.is_absolute() for d in dirs)


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("old")

    with pytest.raises(TypeError):
        write_bytes(target, object())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind


def test_run_json_round_trip_with_nan_as_null(tmp_path):
    write_run_json(tmp_path, {"status": "succeeded", "summary": {"x": float("nan")}})
    raw = json.loads((tmp_path / "run.json").read_text())
    assert raw["schema_version"] == SCHEMA_VERSION and raw["summary"]["x"] is None
    assert read_run_json(tmp_path)["summary"]["x"] is None and read_steps(tmp_path) is None


def test_a_field_outside_the_type_is_never_written(tmp_path):
    with pytest.raises(AssertionError, match="outside rlbench.harness.record.run_record.RunRecord: \\['made_up'\\]"):
        write_run_json(tmp_path, {"status": "succeeded", "made_up": 1})  # type: ignore[typeddict-unknown-key]
    assert not (tmp_path / "run.json").exists()


def test_newer_schema_is_refused_in_one_line(tmp_path):
    shutil.copytree(GOLDEN, tmp_path / "newer")
    raw = json.loads((tmp_path / "newer" / "run.json").read_text())
    (tmp_path / "newer" / "run.json").write_text(json.dumps({**raw, "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(DamagedRecord, match="newer than this rlbench .* upgrade rlbench") as refused:
        read_record(tmp_path / "newer")
    assert "\n" not in str(refused.value)
    with pytest.raises(SchemaError, match="newer than this rlbench"):
        migrate({"schema_version": SCHEMA_VERSION + 1})


@pytest.mark.parametrize("version", [True, False, "1", 1.0, None])
def test_a_schema_version_that_is_not_an_integer_is_refused(tmp_path, version):
    """JSON `true` is a bool, and a bool is an int to Python: it must not read as version 1."""
    raw = json.loads((GOLDEN / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**raw, "schema_version": version}))
    with pytest.raises(DamagedRecord, match="unreadable run record: not an rlbench run record"):
        read_record(tmp_path)


def test_steps_outside_the_vocabulary_are_a_bug(tmp_path):
    with pytest.raises(AssertionError, match="outside the schema vocabulary"):
        write_steps(tmp_path, pd.DataFrame({"step": [1], "made_up": [1.0]}))


def test_steps_round_trip_with_every_schema_column(tmp_path):
    write_steps(tmp_path, pd.DataFrame({"step": [1, 2], "step_time_s": [1.0, 2.0]}))
    steps = read_steps(tmp_path)
    assert list(steps.columns) == list(STEP_METRICS) and steps["step"].tolist() == [1, 2]


def test_every_metric_has_unit_and_direction():
    for metric in STEP_METRICS.values():
        assert metric.unit and metric.direction in ("higher", "lower", "neutral") and metric.description


def test_summary_excludes_warmup():
    steps = pd.DataFrame({"step": [1, 2, 3], "step_time_s": [100.0, 2.0, 4.0]})
    summary = summarize(steps, warmup_steps=1)["step_time_s"]
    assert summary["n"] == 2 and summary["mean"] == 3.0 and summary["max"] == 4.0
    assert summary["unit"] == "s" and summary["direction"] == "lower"


def test_a_record_from_before_the_moe_fields_has_the_configuration_of_a_new_dense_one():
    import copy

    from rlbench.harness.record.compare import configuration_key

    old = json.loads((GOLDEN / "run.json").read_text())
    old["workload"]["model"]["tiny"] = {
        k: v
        for k, v in old["workload"]["model"]["tiny"].items()
        if not k.startswith(("num_experts", "experts_", "expert_", "shared_expert"))
    }
    new = copy.deepcopy(old)
    new["workload"]["model"]["tiny"] |= {
        "num_experts": 0,
        "experts_per_token": 0,
        "expert_intermediate_size": 0,
        "shared_expert_intermediate_size": 0,
    }
    assert configuration_key(old) == configuration_key(new)
    moe = copy.deepcopy(new)
    moe["workload"]["model"]["tiny"] |= {"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 172}
    assert configuration_key(moe) != configuration_key(new)  # an MoE is another model


def test_a_record_from_before_quality_targets_has_the_configuration_of_a_new_one_without():
    import copy

    from rlbench.harness.record.compare import configuration_key

    old = json.loads((GOLDEN / "run.json").read_text())
    assert "target" not in old["workload"]
    new = copy.deepcopy(old)
    new["workload"]["target"] = None
    assert configuration_key(old) == configuration_key(new)  # a nightly baseline from before still matches
    aimed = copy.deepcopy(old)
    aimed["workload"]["target"] = {"metric": "reward_mean", "value": 0.4, "window": 3, "stop": True}
    assert configuration_key(aimed) != configuration_key(new)


def test_the_type_holds_every_field_of_a_real_record():
    raw = json.loads((GOLDEN / "run.json").read_text())
    assert set(raw) <= RUN_FIELDS
    assert {"cpu_lane", "model_path", "returncode", "steps_recorded", "timeout_s", "data"} <= RUN_FIELDS
    assert {path[0] for path in FIELD_CHECKS} <= RUN_FIELDS  # the reader checks only fields the type has


def test_a_version_1_record_reads_migrated():
    """tests/data/records/trl-tiny is a real version-1 record (written after the tp split: it holds rollout_tp)."""
    assert json.loads((GOLDEN / "run.json").read_text())["schema_version"] == 1  # kept as written
    record = read_record(GOLDEN)
    assert record["schema_version"] == SCHEMA_VERSION == 2
    assert (record["parallel"]["tp"], record["parallel"]["rollout_tp"]) == (1, 1)
    assert record["status"] == "succeeded" and record["steps"]["step"].tolist() == [1, 2, 3]
    assert "data" not in record  # written before rlbench recorded its data


def _golden_with_parallel(tmp_path, version: int, parallel: dict) -> dict:
    shutil.copytree(GOLDEN, tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "run.json").read_text())
    (tmp_path / "r" / "run.json").write_text(json.dumps({**raw, "schema_version": version, "parallel": parallel}))
    return read_record(tmp_path / "r")


def test_a_version_1_record_from_before_the_tp_split_reads_its_tp_as_the_rollouts(tmp_path):
    record = _golden_with_parallel(tmp_path, 1, {"dp": 1, "tp": 2, "pp": 1, "sp": 1, "placement": "colocated"})
    assert (record["parallel"]["tp"], record["parallel"]["rollout_tp"]) == (1, 2)
    assert record["parallel"]["cp"] == 1 and record["parallel"]["fuse"] == "none"  # knobs it predates: defaults


def test_a_version_2_records_tp_is_the_trainers(tmp_path):
    record = _golden_with_parallel(tmp_path, 2, {"dp": 1, "tp": 2})
    assert (record["parallel"]["tp"], record["parallel"]["rollout_tp"]) == (2, 1)
