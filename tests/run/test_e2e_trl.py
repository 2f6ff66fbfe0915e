"""End to end: `rlbench run --framework trl --workload gsm8k-grpo-tiny` on CPU writes a true record.

One real 2-step TRL GRPO run is shared by the checks below; token counts are
checked against TRL's own logged figures (num_tokens, completions/mean_length).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from rlbench.harness.record.read import read_record
from rlbench.workloads.catalog import WORKLOAD_DIR
from rlbench.workloads.datasets import load_split
from tests.conftest import EVAL_CHECK, assert_eval_lands, check_from_record, eval_check_workload, run_cli, run_to_target

pytest.importorskip("trl")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, model_cache):
    out = tmp_path_factory.mktemp("results")
    # As a user's first run: no data folder, no hub; the problems come from the copy rlbench ships.
    offline = {"RLBENCH_DATA_DIR": "", "HF_HUB_OFFLINE": "1"}
    workload = str(eval_check_workload(tmp_path_factory.mktemp("workload")))  # one held-out evaluation, step 2
    result = run_cli(
        "run", "--framework", "trl", "--workload", workload, "--steps", "2", "--out", str(out), env=offline
    )
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    return run_dir, result


def test_eval_accuracy_comes_from_trls_own_evaluation(tiny_run):
    """The shared run's held-out evaluation at step 2 ran through TRL's eval loop (its logged eval_reward)."""
    run_dir, _ = tiny_run
    assert_eval_lands(read_record(run_dir), "GRPOTrainer's evaluation")
    assert (run_dir / "eval_prompts.jsonl").read_text().count("gsm8k/test/") == 4


def test_record_is_complete(tiny_run, monkeypatch):
    run_dir, _ = tiny_run
    record = read_record(run_dir)
    assert record["status"] == "succeeded" and record["error"] is None
    assert record["framework"]["name"] == "trl" and record["framework"]["version"]
    assert record["workload"]["name"] == EVAL_CHECK and record["workload"]["steps"] == 2
    assert record["parallel"]["dp"] == 1 and record["seed"] == 0
    env = record["environment"]
    assert env["python"] and env["cpu_model"] and env["packages"]["torch"] and env["gpu_count"] == 0
    assert record["rlbench"]["version"] and record["started_at"] <= record["ended_at"]
    monkeypatch.delenv("RLBENCH_DATA_DIR", raising=False)  # as the run had it
    assert record["data"] == load_split("gsm8k", "train").identity()
    assert record["data"]["origin"] == "embedded" and len(record["data"]["sha256"]) == 64
    assert {
        "run.json",
        "steps.parquet",
        "prediction.json",
        "prompts.jsonl",
        "framework.log",
        "framework_metrics.jsonl",
    } <= set(record["files"])
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]  # no temp files left


def test_steps_are_measured_and_match_trl(tiny_run):
    run_dir, _ = tiny_run
    steps = read_record(run_dir)["steps"]
    assert steps["step"].tolist() == [1, 2]
    assert (steps["step_time_s"] > 0).all() and (steps["time_gen_s"] > 0).all()
    assert (steps["time_update_actor_s"] > 0).all()
    assert (steps["time_gen_s"] + steps["time_update_actor_s"] <= steps["step_time_s"] + 1e-6).all()
    assert steps["reward_mean"].between(0, 1).all()
    raw = [json.loads(line) for line in (run_dir / "framework_metrics.jsonl").read_text().splitlines()]
    logged = [line["trl"] for line in raw if "step" in line and "eval" not in line]  # not the start or evaluation
    # TRL's num_tokens is cumulative prompt+completion tokens seen; ours is per step.
    trl_per_step = [logged[0]["num_tokens"]] + [b["num_tokens"] - a["num_tokens"] for a, b in zip(logged, logged[1:])]
    assert steps["total_tokens"].tolist() == trl_per_step
    responses = 4 * 4  # prompts_per_step x group_size of the tiny workload
    assert steps["num_responses"].tolist() == [responses, responses]
    expected = [round(t["completions/mean_length"] * responses) for t in logged]
    assert steps["response_tokens"].tolist() == expected
    # fixed_length: every response runs to max_response_length.
    assert (steps["response_tokens"] == responses * 32).all()
    # Throughput on the common wall step time, NaN for the first step (no step before it to measure from).
    wall = steps["total_tokens"] / steps["wall_step_time_s"]
    assert math.isnan(steps["tokens_per_s"][0]) and steps["tokens_per_s"][1] == pytest.approx(wall[1])
    assert (steps["peak_host_rss_gb"] > 0).all()


def test_the_record_holds_the_lengths_trl_generated(tiny_run):
    """run.json's response_lengths: each step's lengths from TRL's own completion statistics, beside the cap."""
    run_dir, _ = tiny_run
    record = read_record(run_dir)
    raw = [json.loads(line) for line in (run_dir / "framework_metrics.jsonl").read_text().splitlines()]
    logged = [line["trl"] for line in raw if "step" in line and "eval" not in line]
    lengths = record["response_lengths"]
    assert lengths["cap"] == 32 and lengths["fixed_length"] is True and lengths["n"] == 2
    assert [row["step"] for row in lengths["steps"]] == [1, 2]
    assert [row["mean"] for row in lengths["steps"]] == pytest.approx([t["completions/mean_length"] for t in logged])
    assert [row["max"] for row in lengths["steps"]] == [t["completions/max_length"] for t in logged]
    assert all(row["clipped_share"] == 1.0 for row in lengths["steps"])  # fixed length: every response at the cap


def test_prediction_is_recorded_and_compared(tiny_run):
    run_dir, _ = tiny_run
    record = read_record(run_dir)
    prediction = json.loads((run_dir / "prediction.json").read_text())
    assert prediction["available"] and prediction["hardware"] == "cpu" and prediction["step_time_s"] > 0
    # The prediction is for the run's own work: its mean prompt length and its response length.
    steps = record["steps"]
    assert prediction["inputs"]["prompt_len"] == round((steps["prompt_tokens"] / steps["num_responses"]).median())
    assert prediction["inputs"]["response_len"] == 32
    vs = record["vs_model"]
    assert vs["step"]["measured_over_predicted"] == pytest.approx(
        record["summary"]["step_time_s"]["median"] / prediction["step_time_s"]
    )
    assert "gen" in vs["stages"] and vs["bubble"] < 1
    starts, ends = steps["step_start_unix_s"], steps["step_end_unix_s"]
    assert (starts < ends).all() and (ends.iloc[:-1].values <= starts.iloc[1:].values + 1e-3).all()
    # rlbench's own stamps: each step seen after it ended, and one wall-clock step time for every framework.
    assert (steps["step_seen_unix_s"] >= steps["step_end_unix_s"] - 1e-3).all()
    assert steps["wall_step_time_s"].iloc[1:].notna().all() and (steps["wall_step_time_s"].iloc[1:] >= 0).all()
    # rlbench's MFU: the workload's canonical FLOPs (no old-log-prob pass: one update per batch; no padding) for
    # each step's real tokens over this CPU's fastest measured matmul rate and the common wall step time.
    assert prediction["mfu_peak_flops_per_device"] >= prediction["peak_flops_per_device"]
    canonical = prediction["canonical"]
    assert canonical["available"] and canonical["old_logprob_pass"] is False
    assert canonical["model_flops"] <= prediction["model_flops"]  # TRL's own count includes its padding
    expected = (
        canonical["model_flops"]
        * steps["total_tokens"]
        / canonical["tokens_per_step"]
        / (prediction["gpus"] * prediction["mfu_peak_flops_per_device"] * steps["wall_step_time_s"])
    )
    assert steps["mfu"].iloc[1:].tolist() == pytest.approx(expected.iloc[1:].tolist())
    assert steps["tokens_per_s"].iloc[1:].tolist() == pytest.approx(
        (steps["total_tokens"] / steps["wall_step_time_s"]).iloc[1:].tolist()
    )
    assert 0 < record["summary"]["mfu"]["median"] < 1
    # Launch to the end of step 1: imports, model load and the first step, longer than the step itself.
    assert record["time_to_first_step_s"] > steps["step_time_s"].iloc[0]
    assert record["time_to_first_step_s"] <= record["duration_s"]


def test_host_telemetry_is_sampled_and_aligned(tiny_run):
    import pandas as pd

    run_dir, _ = tiny_run
    record = read_record(run_dir)
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    host = telemetry[telemetry["source"] == "host"]
    rss = host["proc_rss_gb"].dropna()  # the last tick may find the framework already gone
    assert len(rss) >= 5 and (rss > 0).all()
    assert record["telemetry"]["nvml"] is False and record["telemetry"]["ticks"] >= len(host)
    steps = record["steps"]
    # The sampler's view of the framework process agrees in kind with the framework's own peak RSS.
    assert (steps["proc_rss_peak_gb"] > 0.1).all() and (steps["proc_cpu_util_mean_pct"] > 0).all()
    assert steps["energy_j"].isna().all()  # no GPU: energy is unknown, not zero
    assert record["costs"]["cost_per_mtok_usd"] is None


def test_progress_is_shown(tiny_run):
    _, result = tiny_run
    assert "step 1/2" in result.stderr and "step 2/2" in result.stderr and "tokens/s" in result.stderr


def test_the_end_of_a_run_prints_its_headline_and_the_next_command(tiny_run):
    run_dir, result = tiny_run
    assert result.stdout.strip() == str(run_dir)  # stdout stays the record's path alone, for scripts
    summary = read_record(run_dir)["summary"]
    lines = result.stderr.splitlines()
    step = next(line for line in lines if line.startswith("step time "))
    assert f"{summary['wall_step_time_s']['median']:.3g} s" in step and "n=1 post-warm-up steps" in step
    own = next(line for line in lines if line.startswith("framework's step time "))
    assert f"{summary['step_time_s']['median']:.3g} s" in own
    assert any(line.startswith("first step ") and "after launch" in line for line in lines)
    assert any(line.startswith("throughput ") and "tokens/s" in line for line in lines)
    assert any(line.startswith("vs model ") and "measured / predicted" in line for line in lines)
    assert "warning: 1 post-warm-up step(s): compare needs 4 per side" in result.stderr
    assert lines[-1] == f"next: rlbench report {run_dir} --out report.html"
    assert "nvidia-ml-py is not installed" not in result.stderr  # no GPU here to miss


def test_summary_excludes_warmup(tiny_run):
    run_dir, _ = tiny_run
    record = read_record(run_dir)
    summary = record["summary"]["step_time_s"]
    assert summary["n"] == 1 and summary["mean"] == pytest.approx(record["steps"]["step_time_s"].iloc[1])
    assert record["overhead"]["setup_s"] > 0 and record["overhead"]["record_s"] >= 0


def test_crashing_framework_leaves_a_failed_record(tmp_path, model_cache, tiny_run):
    run_dir, _ = tiny_run
    # A model folder whose tokenizer loads but whose weights are gone: TRL itself crashes on load.
    broken = tmp_path / "broken-model"
    shutil.copytree(read_record(run_dir)["model_path"], broken)
    (broken / "model.safetensors").unlink()
    mapping = yaml.safe_load((WORKLOAD_DIR / "gsm8k-grpo-tiny.yaml").read_text())
    mapping["include"] = [str(WORKLOAD_DIR / name) for name in mapping["include"]]
    mapping["name"] = "broken"
    workload = tmp_path / "broken.yaml"
    workload.write_text(yaml.safe_dump(mapping | {"model": {"name": str(broken), "dtype": "float32", "tiny": None}}))
    out = tmp_path / "out"
    result = run_cli("run", "--framework", "trl", "--workload", str(workload), "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: run failed (framework_error)")
    (failed,) = list(out.iterdir())
    record = read_record(failed)
    assert record["status"] == "failed" and record["error"]["kind"] == "framework_error"
    assert record["error"]["log_tail"] and record["returncode"] != 0


def test_timeout_is_recorded(tmp_path, model_cache):
    out = tmp_path / "out"
    result = run_cli(
        "run",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--steps",
        "2",
        "--out",
        str(out),
        env={"RLBENCH_RUN_TIMEOUT_S": "2"},
    )
    assert result.returncode == 2 and "run failed (timeout)" in result.stderr
    (record_dir,) = list(out.iterdir())
    assert read_record(record_dir)["error"]["kind"] == "timeout"


def test_trl_learns_the_learnable_task_to_its_target(tmp_path, model_cache):
    """Learning parity, TRL's part: the tiny model reaches the format task's target and rlbench stops the run.
    `predict --from-record` then gives the run's own step back within its spread and scales it to GPUs."""
    record = run_to_target("trl", tmp_path, timeout_s=600)
    target = record["target"]
    assert target["seconds"] > 0 and target["tokens"] > 0 and target["step"] >= target["window"]
    check_from_record(tmp_path)
