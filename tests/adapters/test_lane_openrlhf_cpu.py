"""End to end on OpenRLHF's CPU lane: `rlbench run --framework openrlhf --workload gsm8k-grpo-tiny` runs its trainer.

One real 2-step OpenRLHF GRPO run (DeepSpeed ZeRO-3 on its CPU accelerator, one vLLM CPU
engine, weights broadcast over gloo) is shared by the checks below. They assert that the
RL loop is real: after every broadcast vLLM holds exactly the actor's weights (checksums
both sides log), the actor's optimizer stepped once per step, and the rewards OpenRLHF
logged are rlbench's scores of the responses it generated. The same run profiles its last step
(`--profile torch --profile-steps 2-2`) and stamps each stage call (spans.parquet).

Runs only where the lane is installed (`nox -s openrlhf_cpu`); skipped elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.record.read import read_record
from rlbench.harness.record.schema import SPANS_FILE
from rlbench.workloads.rewards import score
from tests.conftest import assert_eval_lands, check_from_record, run_cli, run_lane, run_to_target

pytest.importorskip("openrlhf")
from rlbench.adapters.cpu_lane import available as on_cpu_lane  # noqa: E402
from rlbench.adapters.openrlhf.adapter import REWARD_LOG, SYNC_LOG  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not on_cpu_lane(), reason="OpenRLHF's CPU lane is not installed (nox -s openrlhf_cpu)"),
]


@pytest.fixture(scope="module")
def openrlhf_run(tmp_path_factory, model_cache):
    return run_lane(
        "openrlhf", tmp_path_factory.mktemp("results"), 2000, "--profile", "torch", "--profile-steps", "2-2"
    )


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_eval_accuracy_comes_from_openrlhfs_own_evaluation(openrlhf_run):
    """The shared run's held-out evaluation at step 2 ran through OpenRLHF's evaluate (--eval.dataset)."""
    assert_eval_lands(read_record(openrlhf_run), "PPOTrainer.evaluate")


def test_record_is_complete_and_names_the_lane(openrlhf_run):
    record = read_record(openrlhf_run)
    assert record["status"] == "succeeded" and record["framework"]["name"] == "openrlhf"
    lane = record["cpu_lane"]
    assert lane["lane"] == "openrlhf-cpu"
    assert any("vllm_worker_wrap.py" in shim["upstream"] for shim in lane["shims"])
    assert lane["substituted"]["--ds.param_dtype"].startswith("fp32")  # the workload's own precision
    assert {"run.json", "steps.parquet", "prediction.json", SYNC_LOG, REWARD_LOG} <= set(record["files"])


def test_stage_times_come_from_openrlhfs_own_logger(openrlhf_run):
    steps = read_record(openrlhf_run)["steps"]
    assert steps["step"].tolist() == [1, 2]
    for column in ("step_time_s", "time_gen_s", "time_update_actor_s", "time_weight_sync_s", "time_old_log_prob_s"):
        assert (steps[column] > 0).all(), column
    assert (steps["num_responses"] == 16).all() and (steps["response_tokens"] == 16 * 32).all()
    # make_experience is a stage now, not "other": the model prices the old-log-prob pass OpenRLHF runs
    prediction = json.loads((openrlhf_run / "prediction.json").read_text())
    assert prediction["available"] and {s["name"]: s["time_s"] for s in prediction["stages"]}["old_logprob"] > 0
    assert prediction["inputs"]["engine_mode"] == "eager"  # the lane's vLLM CPU build: no CUDA graphs
    # Without packing every row of a policy pass is computed at its batch's longest sequence (4 prompts of
    # different lengths here): the hook's logged width, at least the mean sequence, prices the training passes.
    mean_sequence = steps["total_tokens"] / steps["num_responses"]
    assert (steps["trainer_padded_width"] > mean_sequence).all(), steps["trainer_padded_width"].tolist()
    padded = prediction["inputs"]["trainer_padded_prompt_len"]
    assert padded == round(steps["trainer_padded_width"].median() - 32) > prediction["inputs"]["prompt_len"]


def test_every_sync_delivers_the_actors_weights_and_the_optimizer_stepped(openrlhf_run):
    log = _lines(openrlhf_run / SYNC_LOG)
    actor = [e for e in log if e["side"] == "actor"]
    synced = [e for e in log if e["side"] == "vllm" and e["event"] == "synced"]
    assert len(actor) == len(synced) == 2
    assert [e["optimizer_steps"] for e in actor] == [1, 2]  # DeepSpeed's step count at each broadcast
    for sent, received in zip(actor, synced):
        assert received["numel"] == sent["numel"]
        assert received["abs_sum"] == pytest.approx(sent["abs_sum"], rel=1e-9)
        assert received["sum"] == pytest.approx(sent["sum"], rel=1e-9, abs=1e-6)


def test_rewards_are_rlbench_scores_of_the_generated_responses(openrlhf_run):
    scored = _lines(openrlhf_run / REWARD_LOG)
    assert len(scored) == 2 * 16 + 4  # two steps' responses, then the 4 held-out problems evaluated after step 2
    assert [s["score"] for s in scored] == [score(s["dataset"], s["response"], s["ground_truth"]) for s in scored]
    steps = read_record(openrlhf_run)["steps"]
    per_step = [sum(s["score"] for s in scored[i * 16 : (i + 1) * 16]) / 16 for i in range(2)]
    assert steps["reward_mean"].tolist() == pytest.approx(per_step)
    assert steps["eval_accuracy"].iloc[1] == pytest.approx(sum(s["score"] for s in scored[32:]) / 4)


def test_profile_torch_traces_the_controller_and_the_actor_rank(openrlhf_run):
    """The step ends the run, so the actor's trace is exported at the final save, the controller's after its log."""
    profile = json.loads((openrlhf_run / "run.json").read_text())["profile"]
    assert profile["tool"] == "torch" and profile["steps"] == [2, 2]
    names = sorted(Path(f).name for f in profile["files"])
    assert names[0] == "torch-steps-2-2-actor-rank0.json" and names[1].startswith("torch-steps-2-2-controller-")
    for name in profile["files"]:
        events = json.loads((openrlhf_run / name).read_text())["traceEvents"]
        assert any(e.get("cat") == "cpu_op" and e.get("name", "").startswith("aten::") for e in events), name
    actor = json.loads((openrlhf_run / profile["files"][0]).read_text())["traceEvents"]
    assert any(e.get("name", "").startswith("aten::mm") for e in actor)  # the update's matmuls, not an idle window


def test_stage_spans_are_stamped_inside_their_steps(openrlhf_run):
    """Four stage calls a step, in pipeline order, each as long as OpenRLHF's own timer says (the hooks stamp the
    calls it times) and inside the step's window. The window starts at its logged end less OpenRLHF's summed
    stage times, which leave out the few ms between stages (decode, stats, append): hence the slack."""
    spans, steps = pd.read_parquet(openrlhf_run / SPANS_FILE), read_record(openrlhf_run)["steps"].set_index("step")
    timers = {"gen": "time_gen_s", "old_log_prob": "time_old_log_prob_s", "update_actor": "time_update_actor_s"}
    timers["weight_sync"] = "time_weight_sync_s"
    for step in (1, 2):
        calls = spans[spans["step"] == step].sort_values("start_unix_s")
        assert calls["stage"].tolist() == list(timers)
        assert (calls["end_unix_s"].diff().dropna() > 0).all()
        start, end = steps.loc[step, "step_start_unix_s"], steps.loc[step, "step_end_unix_s"]
        assert calls["start_unix_s"].min() >= start - 0.5 and calls["end_unix_s"].max() <= end
        for _, call in calls.iterrows():
            seconds = call["end_unix_s"] - call["start_unix_s"]
            assert seconds == pytest.approx(steps.loc[step, timers[call["stage"]]], abs=0.05), call["stage"]


def test_trace_of_the_real_record_draws_the_stamped_stages(openrlhf_run):
    """`rlbench trace` of OpenRLHF's real record: a valid trace whose stages ran where drawn (stamped by rlbench's
    hooks in OpenRLHF's processes), with the telemetry as counters."""
    from rlbench.reports.load import load_run
    from rlbench.reports.trace import build_trace
    from tests.reports.test_trace import check_trace_events

    trace = build_trace(load_run(openrlhf_run))
    check_trace_events(trace)
    events = trace["traceEvents"]
    stages = [e for e in events if e.get("cat") == "stage"]
    assert stages and not any(e["args"]["placed"] for e in stages)
    assert {e["args"]["step"] for e in events if e.get("cat") == "step"} == {1, 2}
    assert any(e["ph"] == "C" for e in events)


def test_ls_reports_openrlhf_usable_here():
    line = next(line for line in run_cli("ls").stdout.splitlines() if line.strip().startswith("openrlhf"))
    assert "CPU lane" in line, line


@pytest.fixture(scope="module")
def openrlhf_two_nodes(tmp_path_factory, model_cache):
    from tests.cluster.two_nodes import run_on_two_nodes

    return run_on_two_nodes("openrlhf", tmp_path_factory.mktemp("two-nodes"), timeout_s=1200)


def test_openrlhf_runs_data_parallel_across_two_nodes(openrlhf_two_nodes):
    """OpenRLHF's own multi-node flags (*.num_nodes) on a running cluster, its PACK placement stated, every node
    profiled; the run's settings reached the workers (its weight-sync log is written by them)."""
    from tests.cluster.two_nodes import check_two_node_record

    check_two_node_record(openrlhf_two_nodes)
    record = read_record(openrlhf_two_nodes)
    assert "PACK" in record["cluster"]["placement"]
    command = " ".join(record["command"])
    assert "--actor.num_nodes 2" in command and "--vllm.num_engines 2" in command
    assert (openrlhf_two_nodes / SYNC_LOG).stat().st_size > 0
    for row in record["response_lengths"]["steps"]:  # from each response OpenRLHF's samples hold (hooks.py)
        assert row["p50"] == row["p90"] == row["p99"] == row["max"] == 32, row  # fixed length: every one at the cap


def test_openrlhf_learns_the_learnable_task_to_its_target(tmp_path, model_cache):
    """Learning parity, openrlhf's part: on the same format task as TRL, openrlhf's own trainer reaches the target and
    rlbench stops the run there."""
    record = run_to_target("openrlhf", tmp_path, timeout_s=900)
    assert record["target"]["seconds"] > 0 and record["target"]["step"] >= record["target"]["window"]
    check_from_record(tmp_path)  # predict --from-record on a real record of this framework


@pytest.fixture(scope="module")
def openrlhf_k_step(tmp_path_factory, model_cache):
    """OpenRLHF's async trainer, two batches ahead (K-step), on the tail workload: vLLM on its own logical GPU."""
    parallel = ("--parallel", "placement=disaggregated", "--parallel", "async=2")
    out = tmp_path_factory.mktemp("k-step")
    return run_lane("openrlhf", out, 1200, *parallel, evaluate=False, workload="gsm8k-grpo-tiny-tail")


def test_openrlhfs_async_trainer_runs_k_steps_ahead_on_the_lane(openrlhf_k_step):
    """OpenRLHF resolved its async trainer with a queue of 2 batches; every sync still delivered the actor's
    weights; the record holds each step's generated lengths (a tail, not a fixed length) and, from the stage
    stamps, each role's busy and idle seconds and the staleness of what each step trained (at most 2 behind)."""
    record = read_record(openrlhf_k_step)
    assert record["status"] == "succeeded" and record["steps"]["step"].tolist() == [1, 2]
    train = json.loads((openrlhf_k_step / "openrlhf_resolved.json").read_text())["args"]["train"]
    assert (train["async_enable"], train["async_queue_size"], train["colocate_all"]) == (True, 2, False)
    log = _lines(openrlhf_k_step / SYNC_LOG)
    actor = [e for e in log if e["side"] == "actor"]
    synced = [e for e in log if e["side"] == "vllm" and e["event"] == "synced"]
    assert len(actor) == len(synced) >= 2
    for sent, received in zip(actor, synced):
        assert received["abs_sum"] == pytest.approx(sent["abs_sum"], rel=1e-9)
    lengths = record["response_lengths"]
    assert not lengths["fixed_length"] and [row["step"] for row in lengths["steps"]] == [1, 2]
    assert all(row["p90"] is not None and row["max"] <= lengths["cap"] for row in lengths["steps"])
    roles = record["async_roles"]["steps"]
    assert [step["step"] for step in roles] == [1, 2]
    assert roles[0]["staleness"]["max_versions_behind"] == 0
    assert all(0 <= step["staleness"]["max_versions_behind"] <= 2 and step["staleness"]["n"] == 32 for step in roles)
    for step in roles:
        for seconds in step["roles"].values():
            assert seconds["busy_s"] > 0 and seconds["busy_s"] + seconds["idle_s"] == pytest.approx(step["window_s"])
