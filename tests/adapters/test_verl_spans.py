"""verl's stage spans from Ray's timeline (rlbench.adapters.verl.metrics.read_spans), on a trimmed real timeline;
runs without verl.

tests/data/verl_ray_timeline.json: the first three steps of a 6-step CPU-lane run of gsm8k-grpo-tiny (verl 0.9.1,
Ray's `ray.timeline()` as verl's main_ppo writes it), kept: every WorkerDict and agent-loop call, the first two
rollout-server `generate` and reward `compute_score` calls of each step, and a few calls that are no stage.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlbench.adapters.verl import metrics as verl_metrics
from rlbench.adapters.verl.config import HYDRA_DIR, TIMELINE_FILE
from rlbench.harness.record.schema import SPAN_COLUMNS

TIMELINE = Path(__file__).resolve().parents[1] / "data" / "verl_ray_timeline.json"
STAGES = ["gen", "reward", "old_log_prob", "update_actor", "weight_sync"]  # in the order verl runs them


def _events() -> list:
    return json.loads(TIMELINE.read_text())


def _run_dir(tmp_path: Path, text: str | None = None) -> Path:
    if text is None:
        shutil.copy(TIMELINE, tmp_path / TIMELINE_FILE)
    else:
        (tmp_path / TIMELINE_FILE).write_text(text)
    return tmp_path


def _call(events: list, task: str, index: int) -> tuple[float, float]:
    event = [e for e in events if e["cat"] == f"task::{task}"][index]
    return event["ts"] / 1e6, (event["ts"] + event["dur"]) / 1e6


def test_each_step_gets_one_span_per_stage_at_the_calls_real_times(tmp_path):
    table = verl_metrics.read_spans(_run_dir(tmp_path))
    events = _events()
    assert list(table.columns) == list(SPAN_COLUMNS)
    assert table["step"].tolist() == [1] * 5 + [2] * 5 + [3] * 5
    assert table.groupby("step")["stage"].apply(list).tolist() == [STAGES] * 3
    update = table[table["stage"] == "update_actor"]
    for k in range(3):
        assert tuple(update.iloc[k][["start_unix_s", "end_unix_s"]]) == pytest.approx(
            _call(events, "WorkerDict.actor_rollout_update_actor", k)
        )
    # gen: from the agent loop's rollout call to the last response the server generated in the step.
    gen = table[(table["step"] == 1) & (table["stage"] == "gen")].iloc[0]
    assert gen["start_unix_s"] == pytest.approx(_call(events, "AgentLoopWorkerTQ.generate_sequences", 0)[0])
    assert gen["end_unix_s"] == pytest.approx(_call(events, "vLLMHttpServer.generate", 1)[1])
    # The sync before step 1 is in no step; each step's own sync (verl's update_weights of that step) ends it.
    syncs = table[table["stage"] == "weight_sync"]["start_unix_s"].tolist()
    assert syncs == pytest.approx([_call(events, "WorkerDict.actor_rollout_update_weights", k)[0] for k in (1, 2, 3)])
    # Steps run one after another: a step's last call ends before the next step's first starts.
    bounds = table.groupby("step").agg(start=("start_unix_s", "min"), end=("end_unix_s", "max"))
    assert (bounds["start"].to_numpy()[1:] > bounds["end"].to_numpy()[:-1]).all()


def test_rollouts_are_numbered_back_from_the_last_logged_step(tmp_path):
    """A long run's timeline may have lost its oldest events (Ray caps what it keeps): the last rollout is the
    last step verl logged."""
    assert sorted(set(verl_metrics.read_spans(_run_dir(tmp_path), last_step=7)["step"])) == [5, 6, 7]


def test_a_validation_round_is_no_step_and_no_stage(tmp_path):
    """verl's validation (an eval_accuracy target) makes one more rollout round in a step that validates, after
    that step's weight sync: its calls are left out and the rounds after it keep their steps."""
    events = _events()
    table = verl_metrics.spans_from_timeline(events, evaluated=frozenset({1}))  # round 2 read as step 1's validation
    assert sorted(set(table["step"])) == [1, 2]
    update = table[table["stage"] == "update_actor"]
    assert update["start_unix_s"].tolist() == pytest.approx(
        [_call(events, "WorkerDict.actor_rollout_update_actor", k)[0] for k in (0, 2)]
    )
    numbered_back = verl_metrics.spans_from_timeline(events, last_step=3, evaluated=frozenset({2}))
    assert sorted(set(numbered_back["step"])) == [2, 3]


def test_a_damaged_timeline_gives_no_spans_or_its_readable_events(tmp_path):
    text = TIMELINE.read_text()
    assert verl_metrics.read_spans(_run_dir(tmp_path, text[: len(text) // 2])) is None  # a dump cut short
    assert verl_metrics.read_spans(_run_dir(tmp_path, '{"not": "a list"}')) is None
    assert verl_metrics.read_spans(tmp_path / "missing") is None
    broken = [*_events(), "junk", {"cat": "task::WorkerDict.actor_rollout_update_actor", "ph": "X", "ts": "x"}]
    assert len(verl_metrics.read_spans(_run_dir(tmp_path, json.dumps(broken)))) == 15
    no_stage = [e for e in _events() if "WorkerDict" not in e["cat"] and "generate" not in e["cat"]]
    assert verl_metrics.read_spans(_run_dir(tmp_path, json.dumps(no_stage))) is None


def test_the_one_step_off_trainer_is_left_to_placed_stages(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / HYDRA_DIR / ".hydra").mkdir(parents=True)
    (run_dir / HYDRA_DIR / ".hydra" / "config.yaml").write_text("actor_rollout_ref:\n  hybrid_engine: false\n")
    assert verl_metrics.read_spans(run_dir) is None


@pytest.mark.parametrize(
    "task, stage",
    [
        ("WorkerDict.actor_rollout_compute_log_prob", "old_log_prob"),
        ("WorkerDict.ref_compute_ref_log_prob", "ref"),
        ("WorkerDict.actor_rollout_compute_ref_log_prob", "ref"),
        ("WorkerDict.critic_infer_batch", "values"),
        ("WorkerDict.critic_train_mini_batch", "update_critic"),
        ("WorkerDict.actor_rollout_update_weights", "weight_sync"),
        ("SGLangHttpServer.generate", "gen"),
        ("RewardLoopWorker.compute_score", "reward"),
        ("GlobalRequestLoadBalancer.acquire_server", None),
        ("WorkerDict.actor_rollout_init_model", None),
    ],
)
def test_ray_task_names_map_to_rlbench_stages(task, stage):
    assert verl_metrics.stage_of(task) == stage


def test_the_timeline_is_kept_for_small_or_profiled_runs_only():
    from rlbench.adapters.verl.config import TIMELINE_FILE, TIMELINE_MAX_RESPONSES, timeline_settings
    from rlbench.harness.spec.parallel import Parallelism
    from rlbench.harness.spec.profile import ProfileRequest
    from rlbench.harness.spec.runspec import RunSpec
    from rlbench.workloads.catalog import load_workload

    small = load_workload("gsm8k-grpo-tiny")
    assert small.steps * small.responses_per_step <= TIMELINE_MAX_RESPONSES
    spec = RunSpec(framework="verl", workload=small, parallel=Parallelism())
    assert timeline_settings(spec, Path("/r")) == {"ray_kwargs.timeline_json_file": f"/r/{TIMELINE_FILE}"}
    big = load_workload("gsm8k-grpo")
    big = big.with_steps(TIMELINE_MAX_RESPONSES // big.responses_per_step + 1)
    assert timeline_settings(RunSpec(framework="verl", workload=big, parallel=Parallelism()), Path("/r")) == {}
    profiled = RunSpec(
        framework="verl",
        workload=big,
        parallel=Parallelism(),
        profile=ProfileRequest(tool="torch", first_step=2, last_step=2),
    )
    assert timeline_settings(profiled, Path("/r"))  # a profiled run asked to see where its time went


# tests/data/verl_one_step_off_timeline.json: a 3-step CPU-lane run of gsm8k-grpo-tiny-tail with
# --parallel placement=disaggregated,async=one-step (verl 0.9.1's one-step-off trainer, the lane's gloo checkpoint
# engine), kept: the trainer's WorkerDict calls, the rollout side's weight syncs and every generated response.
ONE_STEP_OFF = TIMELINE.with_name("verl_one_step_off_timeline.json")


def _one_step_off_run(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy(ONE_STEP_OFF, tmp_path / TIMELINE_FILE)
    (tmp_path / HYDRA_DIR / ".hydra").mkdir(parents=True)
    (tmp_path / HYDRA_DIR / ".hydra" / "config.yaml").write_text("actor_rollout_ref:\n  hybrid_engine: false\n")
    return tmp_path


def test_one_step_off_roles_and_staleness_come_from_the_real_timeline(tmp_path):
    """verl's one-step-off trainer, read from its own calls: step 1 trains the batch generated before it (0
    versions behind), every later step the batch generated beside the previous step's training (1 behind); the
    last step has no next batch to generate, so the rollout pool is mostly idle there."""
    ledger = verl_metrics.read_roles(_one_step_off_run(tmp_path), responses_per_step=32, steps=3)
    steps = ledger["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3] and "Ray timeline" in ledger["source"]
    assert [s["staleness"]["max_versions_behind"] for s in steps] == [0, 1, 1]
    assert all(s["staleness"]["n"] == 32 and s["staleness"]["share_spanning_a_sync"] == 0 for s in steps)
    second, last = steps[1]["roles"], steps[2]["roles"]
    assert second["rollout"]["busy_s"] > 0.25 * steps[1]["window_s"]  # batch 3 generated beside step 2
    assert last["rollout"]["busy_s"] < 0.1 * steps[2]["window_s"]
    for step in steps:
        for seconds in step["roles"].values():
            assert seconds["busy_s"] + seconds["idle_s"] == pytest.approx(step["window_s"])
    assert len(verl_metrics.read_roles(tmp_path, 32, steps=2)["steps"]) == 2  # only the steps rlbench recorded


def test_a_colocated_or_unreadable_run_has_no_role_ledger(tmp_path):
    assert verl_metrics.read_roles(_run_dir(tmp_path), 32, 3) is None  # colocated: one role, stage spans instead
    run_dir = _one_step_off_run(tmp_path / "broken")
    (run_dir / TIMELINE_FILE).write_text('{"not": "a list"')
    assert verl_metrics.read_roles(run_dir, 32, 3) is None
