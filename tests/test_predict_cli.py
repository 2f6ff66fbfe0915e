"""`rlbench predict`: stage table and JSON from the work-depth model, sweeps ranked, bad input refused."""

from __future__ import annotations

import json

from tests.conftest import run_cli

BASE = ("predict", "--model-config", "Qwen/Qwen2.5-7B-Instruct", "--workload", "math-grpo", "--hardware", "H100-SXM",
        "--gpus", "8")


def test_json_has_the_documented_keys():
    result = run_cli(*BASE, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_gb", "cost_per_mtok_usd", "brent"):
        assert key in data
    names = [s["name"] for s in data["stages"]]
    assert names[:2] == ["generation_prefill", "generation_decode"] and "weight_sync" in names
    for stage in data["stages"]:
        assert {"name", "flops", "bytes", "comm_bytes", "time_s"} <= set(stage)
    assert data["brent"]["lower_s"] <= data["step_time_s"]
    # Datasheet GPU rows state no per-op latency, so the depth term (and Brent's upper bound) is unknown.
    assert data["brent"]["upper_s"] is None


def test_table_for_humans():
    result = run_cli(*BASE)
    assert result.returncode == 0 and "generation_decode" in result.stdout and "step time" in result.stdout


def test_sweep_is_ranked_and_lists_what_it_skipped():
    result = run_cli(*BASE, "--sweep", "tp=1,2,4", "--sweep", "placement=colocated,disaggregated", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    times = [row["step_time_s"] for row in data["ranked"]]
    assert len(times) + len(data["skipped"]) == 6 and times == sorted(times)


def test_bad_input_is_one_line_exit_2():
    result = run_cli(*BASE[:-3], "H20", "--gpus", "8")
    assert result.returncode == 2 and "did you mean 'H200'" in result.stderr and "Traceback" not in result.stderr
    result = run_cli(*BASE, "--sweep", "tq=1,2")
    assert result.returncode == 2 and result.stderr.startswith("error: --sweep 'tq=1,2'")


def test_framework_launch_shape_on_a_gpu_row_without_its_floor():
    result = run_cli(*BASE, "--framework", "verl", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "--framework verl: its launch shape is used; no framework floor on H100-SXM" in data["notes"][0]
    assert all(stage["floor_s"] == 0.0 for stage in data["stages"])
    assert data["estimate_terms"]["engine_mode"] == "cuda_graphs"  # verl's vLLM, CUDA graphs (enforce_eager off)


def test_bound_and_estimate_are_both_given_and_labelled():
    result = run_cli(*BASE, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["step_time_bound_s"] < data["step_time_estimate_s"]
    assert data["mfu_estimate"] < data["mfu_bound"]
    assert "neutral launch shape, token-packed micro-batches of 16384 tokens" in data["notes"][0]
    text = run_cli(*BASE).stdout
    for label in ("  bound ", "  estimate ", "MFU bound", "MFU estimate", "estimate s"):
        assert label in text
