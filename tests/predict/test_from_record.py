"""`rlbench predict --from-record RUN`: a measured run scaled to another layout or device, with what was measured
and what was modelled said, and its own layout predicted back against its measured step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlbench.harness.record.schema import PREDICTION_FILE
from tests.conftest import run_cli

RECORD = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"


def test_the_runs_own_layout_comes_back_within_its_spread():
    result = run_cli("predict", "--from-record", str(RECORD), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    check = data["consistency"]
    assert check["within_spread"] and check["n"] == 2
    assert data["step_time_s"] == pytest.approx(check["measured_median_s"], rel=1e-6)
    gen = next(row for row in data["stages"] if row["stage"] == "gen")
    assert gen["basis"] == "measured ratio x model" and gen["predicted_s"] == pytest.approx(gen["measured_s"])
    assert data["basis"]["measured"] == ["each timed stage's ratio to the model", "the step's time outside the stages"]


def test_another_device_carries_the_lengths_only_and_says_so():
    result = run_cli("predict", "--from-record", str(RECORD), "--hardware", "H100-SXM", "--gpus", "8", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["hardware"] == "H100-SXM" and data["gpus"] == 8 and data["consistency"] is None
    assert "every stage's rate on H100-SXM (the run was on cpu)" in data["basis"]["modelled"]
    assert all(row["basis"] == "model" for row in data["stages"])
    assert data["step_time_s"] == pytest.approx(data["step_time_model_only_s"])
    text = run_cli("predict", "--from-record", str(RECORD), "--hardware", "H100-SXM", "--gpus", "8").stdout
    assert "step time" in text and "modelled:" in text


def test_another_device_prices_the_frameworks_launch_there_not_the_runs(tmp_path):
    """A CPU lane's launch (here: training passes padded to 4x the prompt) is priced at the run's own layout only."""
    padded = tmp_path / "padded"
    shutil.copytree(RECORD, padded)
    prediction = json.loads((padded / PREDICTION_FILE).read_text())
    prediction["inputs"]["trainer_padded_prompt_len"] = 4 * prediction["inputs"]["prompt_len"]
    (padded / PREDICTION_FILE).write_text(json.dumps(prediction))

    def plan(run: Path, *extra: str) -> dict:
        result = run_cli("predict", "--from-record", str(run), "--json", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def update(data: dict) -> float:
        return next(row["model_at_run_s"] for row in data["stages"] if row["stage"] == "update_actor")

    assert update(plan(padded)) > update(plan(RECORD))  # where the run ran, its padding is priced
    on_gpus = ("--hardware", "H100-SXM", "--gpus", "8")
    assert plan(padded, *on_gpus)["step_time_s"] == pytest.approx(plan(RECORD, *on_gpus)["step_time_s"])
    assert "the framework's launch on H100-SXM" in plan(padded, *on_gpus)["basis"]["modelled"]


def test_a_knob_given_replaces_the_runs_own_and_twice_is_still_refused():
    """The record states every knob (tp=1 among them): `--parallel tp=2` is the target's tp, not a clash."""
    base = ("predict", "--from-record", str(RECORD), "--hardware", "H100-SXM", "--gpus", "8")
    result = run_cli(*base, "--parallel", "tp=2", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["parallel"]["tp"] == 2
    twice = run_cli(*base, "--parallel", "tp=2", "--parallel", "tp=4")
    assert twice.returncode == 2 and "--parallel tp= is given twice (tp=2 and tp=4)" in twice.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--gpus", "4"), "a CPU run is one device; scale it to GPUs with --hardware"),
        (("--workload", "gsm8k-grpo"), "drop --workload"),
        (("--sweep", "tp=1,2"), "drop --sweep"),
    ],
)
def test_from_record_refuses_what_it_cannot_honour_in_one_line(extra, message):
    result = run_cli("predict", "--from-record", str(RECORD), *extra)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_predict_without_a_record_still_needs_its_inputs():
    result = run_cli("predict", "--workload", "gsm8k-grpo", "--hardware", "H100-SXM")
    assert result.returncode == 2
    assert (
        result.stderr.strip() == "error: --model-config is required (or give --from-record RUN to scale a measured run)"
    )


@pytest.mark.parametrize("content", ["[1, 2]", '{"available": tru', "\udcff"])
def test_a_damaged_prediction_is_the_readers_one_line(tmp_path, content):
    """prediction.json read through the same guard as `report` (record.read.read_prediction): a list, cut-short
    JSON or bytes that are not UTF-8 are one line naming the file, never an AttributeError."""
    damaged = tmp_path / "r"
    shutil.copytree(RECORD, damaged)
    (damaged / "prediction.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    result = run_cli("predict", "--from-record", str(damaged))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "prediction.json" in result.stderr and "Traceback" not in result.stderr
