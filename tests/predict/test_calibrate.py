"""`rlbench calibrate`: real TRL runs measure the framework floor, cache it, and predictions then include it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlbench.harness.perfmodel import FrameworkFloor
from rlbench.harness.predict.floor_cache import floor_file, load_floor, save_floor
from tests.conftest import run_cli

FLOOR = FrameworkFloor(
    fixed_s={"gen": 0.02, "update_actor": 0.15}, per_decode_step_s={"gen": 0.003}, source="test calibration"
)


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _one_error_line(result) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    return result.stderr


def test_bad_calibration_requests_are_one_line_exit_2(own_cache):
    assert "two different positive response lengths" in _one_error_line(
        run_cli("calibrate", "--framework", "trl", "--lengths", "8")
    )
    assert "unknown framework 'nope'" in _one_error_line(run_cli("calibrate", "--framework", "nope"))
    assert not floor_file("trl").exists()


def test_a_framework_that_cannot_run_here_is_refused_before_anything_is_written(own_cache, tmp_path):
    from rlbench.harness.spec.environment import gpus

    if gpus()[0]:
        pytest.skip("verl can run on a GPU machine")
    out = tmp_path / "calibration"
    assert "'verl' cannot run on this machine" in _one_error_line(
        run_cli("calibrate", "--framework", "verl", "--out", str(out))
    )
    assert not out.exists() and not floor_file("verl").exists()


def test_an_unreadable_floor_file_is_named_with_the_fix(own_cache):
    floor_file("trl").parent.mkdir(parents=True)
    floor_file("trl").write_text("{not json")
    floor, why = load_floor("trl")
    assert floor is None and "unreadable" in why and "rlbench calibrate --framework trl" in why


def test_predict_with_a_framework_needs_its_floor_on_the_cpu_only(own_cache):
    args = ("predict", "--model-config", "Qwen2.5-0.5B-Instruct", "--workload", "gsm8k-grpo-tiny")
    assert "rlbench calibrate --framework trl" in _one_error_line(
        run_cli(*args, "--hardware", "cpu", "--framework", "trl")
    )
    save_floor("trl", FLOOR, [])
    # A GPU row takes the framework's launch shape but never the floor measured on this CPU, and says so.
    shown = run_cli(*args, "--hardware", "H100-SXM", "--framework", "trl", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert "no framework floor on H100-SXM" in data["notes"][0]
    assert all(stage["floor_s"] == 0.0 for stage in data["stages"])


def test_a_floor_is_ignored_once_the_framework_or_machine_changed(own_cache):
    path = save_floor("trl", FLOOR, [])
    assert load_floor("trl") == (FLOOR, "")
    cached = json.loads(path.read_text())
    path.write_text(json.dumps(cached | {"framework_version": "0.0.1"}))
    floor, why = load_floor("trl")
    assert floor is None and "framework_version" in why and "rlbench calibrate --framework trl" in why


def test_run_predictions_include_the_cached_floor(own_cache, monkeypatch):
    from rlbench.harness.perfmodel import cpu_hardware
    from rlbench.harness.predict import cpu_probe
    from rlbench.harness.predict.run_prediction import predict_run
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    # A stand-in CPU row (peaks of the right order): no CPU probe needed for this check
    monkeypatch.setattr(cpu_probe, "cpu_row", lambda: cpu_hardware(1e11, 1e10, op_latency_s=3e-4))
    monkeypatch.setattr(cpu_probe, "best_flops_per_s", lambda: 1e11)  # MFU's CPU peak, also the probe's
    workload = load_workload("gsm8k-grpo-tiny")
    args = (workload, parse_parallel(()), "Qwen2.5-0.5B-Instruct", {})
    bare = predict_run(*args, prompt_len=90, recompute_old_logprob=False, framework="trl")
    assert "rlbench calibrate" in bare["floor"]["reason"]
    save_floor("trl", FLOOR, [])
    floored = predict_run(*args, prompt_len=90, recompute_old_logprob=False, framework="trl")
    assert floored["floor"]["source"] == "test calibration"
    added = FLOOR.seconds("gen", workload.max_response_length) + FLOOR.seconds("update_actor", 0)
    assert floored["step_time_s"] == pytest.approx(bare["step_time_s"] + added)
    # A GPU run never takes the floor measured on this machine's CPU.
    gpu = (workload, parse_parallel(()), "Qwen2.5-0.5B-Instruct", {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]})
    on_gpu = predict_run(*gpu, prompt_len=90, recompute_old_logprob=False, framework="trl")
    assert "no framework floor on H100-SXM" in on_gpu["floor"]["reason"]


@pytest.mark.slow
def test_calibrate_runs_trl_and_caches_a_floor_that_predict_uses(tmp_path):
    pytest.importorskip("trl")
    env = {"RLBENCH_CACHE": str(tmp_path / "cache")}
    result = run_cli(
        "calibrate",
        "--framework",
        "trl",
        "--lengths",
        "4,8",
        "--steps",
        "2",
        "--out",
        str(tmp_path / "calibration"),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    cache = Path(result.stdout.strip().splitlines()[-1])
    assert "floor: gen" in result.stdout and cache.name == "floor-trl.json"
    cached = json.loads(cache.read_text())
    assert cached["framework"] == "trl" and cached["framework_version"] and cached["threads"] >= 1
    assert [c["response_len"] for c in cached["cells"]] == [4, 8]
    for cell in cached["cells"]:
        record = json.loads((Path(cell["record"]) / "run.json").read_text())
        assert record["status"] == "succeeded"
        assert cell["measured_s"]["gen"] == record["summary"]["time_gen_s"]["median"]
        assert 0 < cell["predicted_s"]["gen"] and 0 < cell["predicted_s"]["update_actor"]
        # The run's prediction is of what TRL ran: its micro-batch, every row prefilled by HF generate.
        inputs = json.loads((Path(cell["record"]) / "prediction.json").read_text())["inputs"]
        assert inputs["shared_prefill"] is False and inputs["micro_batch_size"] == 16
        assert inputs["kv_cache"] == "concat"
    floor = cached["floor"]
    # every column TRL logged in both runs is fitted, and the step's time outside them ("other")
    logged = set.intersection(*(set(c["measured_s"]) for c in cached["cells"]))
    assert set(floor["fixed_s"]) == logged >= {"gen", "update_actor", "other"} and min(floor["fixed_s"].values()) >= 0
    # The Trainer's step (optimizer, logging) costs far more than a hidden-64 model's arithmetic.
    assert floor["fixed_s"]["update_actor"] > 0

    model = json.loads((Path(cached["cells"][0]["record"]) / "run.json").read_text())["model_path"]
    shown = run_cli(
        "predict",
        "--model-config",
        model,
        "--workload",
        "gsm8k-grpo-tiny",
        "--hardware",
        "cpu",
        "--framework",
        "trl",
        "--json",
        env=env,
    )
    assert shown.returncode == 0, shown.stderr
    stages = {s["name"]: s for s in json.loads(shown.stdout)["stages"]}
    assert stages["actor_update"]["floor_s"] == pytest.approx(floor["fixed_s"]["update_actor"])
    assert stages["generation_decode"]["floor_s"] > 0 or floor["fixed_s"]["gen"] == 0


def _calibration_record(folder: Path, length: int, gen: float, floor: dict | None = None) -> Path:
    """A succeeded record like a verl lane's at response length `length`: gen, adv, update_actor and weight_sync
    timed, reward not; each step 0.5 s longer than its stages; its prediction.json (with `floor` if given)."""
    import dataclasses

    import numpy as np
    import pandas as pd

    from rlbench.harness.record.run_record import write_run_json
    from rlbench.harness.record.store import write_steps
    from rlbench.workloads.catalog import load_workload

    folder.mkdir(parents=True)
    workload = dataclasses.asdict(load_workload("gsm8k-grpo-tiny").with_steps(6)) | {"max_response_length": length}
    workload["warmup_steps"] = 1
    record = {"status": "succeeded", "framework": {"name": "trl"}, "workload": workload, "parallel": {"dp": 1}}
    write_run_json(folder, record)
    wobble = np.array([5.0, 0.0, 0.01, -0.01, 0.02, 0.0])  # a slow warm-up step, then a little noise
    stages = {"gen": gen + wobble, "adv": 0.2 + wobble, "update_actor": 0.3 + wobble, "weight_sync": 0.1 + wobble}
    columns = {f"time_{name}_s": values for name, values in stages.items()} | {"time_reward_s": np.full(6, np.nan)}
    step = sum(stages.values()) + 0.5 + wobble
    write_steps(folder, pd.DataFrame({"step": range(1, 7), "step_time_s": step, **columns}))
    floor_s = (floor or {}).get("fixed_s", {})
    predicted = [
        {"name": name, "time_s": 0.01 + floor_s.get(column, 0.0), "floor_s": floor_s.get(column, 0.0)}
        for column, name in (("gen", "generation_decode"), ("adv", "advantage"), ("update_actor", "actor_update"))
    ] + [{"name": "generation_prefill", "time_s": 0.002}, {"name": "weight_sync", "time_s": 0.001}]
    prediction = {"available": True, "stages": predicted, "step_time_s": sum(s["time_s"] for s in predicted)}
    (folder / "prediction.json").write_text(json.dumps(prediction | ({"floor": floor} if floor else {})))
    return folder


def test_calibration_cells_take_every_logged_column_and_the_time_outside_them(tmp_path):
    from rlbench.harness.sweep.calibrate import calibration_cell

    # an earlier floor in the run's prediction is taken out: calibration compares with the model alone
    cell = calibration_cell(_calibration_record(tmp_path / "r8", 8, 2.0, {"fixed_s": {"gen": 1.0}}))
    assert set(cell["measured_s"]) == {"gen", "adv", "update_actor", "weight_sync", "other"}  # no reward logged
    assert cell["measured_s"]["gen"] == pytest.approx(2.0) and cell["predicted_s"]["gen"] == pytest.approx(0.012)
    assert cell["measured_s"]["other"] == pytest.approx(0.5)  # the median of step - stages over steps 2..6
    assert cell["predicted_s"]["other"] == 0.0 and cell["predicted_s"]["weight_sync"] == pytest.approx(0.001)
    assert cell["steps"] == 5 and all(0 < e < 0.05 for e in cell["measured_se_s"].values())


def test_a_floor_is_judged_on_runs_outside_its_calibration(own_cache, tmp_path):
    import sys

    from rlbench.harness.errors import RLBenchError
    from rlbench.harness.sweep.calibrate import fit_floor
    from tests.conftest import PROJECT_ROOT

    sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
    import judge_calibration  # noqa: E402  (benchmarks/ is scripts, not a package)

    runs = [_calibration_record(tmp_path / f"r{length}", length, 1.0 + 0.01 * length) for length in (8, 16)]
    floor, cells, cache = fit_floor("trl", runs)
    assert [Path(c["record"]) for c in cells] == runs
    assert floor.per_decode_step_s["gen"] == pytest.approx(0.01) and floor.fixed_s["other"] > 0.4
    with pytest.raises(RLBenchError, match="calibration runs"):
        judge_calibration.judge(cache, runs[0])
    judged = _calibration_record(tmp_path / "judged", 32, 1.32, floor.to_dict())
    row = judge_calibration.judge(cache, judged)
    assert row["n"] == 5 and row["ratio_before"] > 5 and row["ratio_after"] < row["ratio_before"]
