"""Run records: unique folders, atomic files, schema checks, summaries without warm-up."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rlbench.atomic import write_bytes
from rlbench.record.schema import SCHEMA_VERSION, STEP_METRICS, SchemaError
from rlbench.record.store import load_record, new_run_dir, summarize, write_run_json, write_steps


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
    assert load_record(tmp_path)["steps"] is None


def test_newer_schema_is_refused(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(SchemaError, match="newer than this rlbench"):
        load_record(tmp_path)


def test_steps_outside_the_vocabulary_are_a_bug(tmp_path):
    with pytest.raises(AssertionError, match="outside the schema vocabulary"):
        write_steps(tmp_path, pd.DataFrame({"step": [1], "made_up": [1.0]}))


def test_steps_round_trip_with_every_schema_column(tmp_path):
    write_steps(tmp_path, pd.DataFrame({"step": [1, 2], "step_time_s": [1.0, 2.0]}))
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    steps = load_record(tmp_path)["steps"]
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

    from rlbench.record.compare import configuration_key
    from tests.conftest import GOLDEN_RECORDS

    old = json.loads((GOLDEN_RECORDS / "trl-tiny" / "run.json").read_text())
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
