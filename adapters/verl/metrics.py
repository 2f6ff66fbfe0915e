"""verl's logged metrics in rlbench's step vocabulary: one file-logger line (JSON) becomes one row; and its
stage calls with their real start and end, from Ray's timeline of the run (`read_spans`).
"""

from __future__ import annotations

import bisect
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rlbench.adapters.common import whole_count
from rlbench.adapters.verl.config import HYDRA_DIR, TIMELINE_FILE
from rlbench.harness.record.async_roles import Call, role_ledger
from rlbench.harness.record.schema import SPAN_COLUMNS

GIB_IN_GB = 1024**3 / 1e9  # verl reports memory in GiB; rlbench records GB


def _num(data: dict[str, Any], *keys: str) -> float:
    """The first of `keys` that verl logged, as a float (verl writes NaN as null)."""
    for key in keys:
        if data.get(key) is not None:
            return float(data[key])
    return math.nan


# rlbench stage column -> verl timing keys, first found wins. In one-step-off mode generation runs
# beside the previous step's training: `generate_async` is its own duration, `gen` only the wait for it.
# verl computes rule rewards inside the rollout (reward loop workers), so `reward` is usually absent.
_STAGES = {
    "time_gen_s": ("timing_s/generate_async", "timing_s/gen"),
    "time_weight_sync_s": ("timing_s/update_weights", "timing_s/sync_rollout_weights"),
    **{
        f"time_{stage}_s": (f"timing_s/{stage}",)
        for stage in ("reward", "old_log_prob", "ref", "values", "adv", "update_actor", "update_critic")
    },
}


def normalize(step: int, data: dict[str, Any]) -> dict[str, float]:
    """One verl file-logger line -> one row of rlbench's step vocabulary."""
    row: dict[str, float] = {
        "step": step,
        "step_time_s": _num(data, "timing_s/step"),
        "step_start_unix_s": math.nan,
        "step_end_unix_s": math.nan,
    }  # verl logs no clock
    for column, keys in _STAGES.items():
        row[column] = _num(data, *keys)
    # verl logs per-sequence means and the batch's prompt+response token total; the count follows exactly.
    prompt_mean, response_mean = _num(data, "prompt_length/mean"), _num(data, "response_length/mean")
    per_response = prompt_mean + response_mean
    responses = whole_count(_num(data, "perf/total_num_tokens") / per_response if per_response > 0 else math.nan)
    row["num_responses"] = responses
    row["prompt_tokens"] = whole_count(prompt_mean * responses)
    row["response_tokens"] = whole_count(response_mean * responses)
    row["reward_mean"] = _num(data, "critic/score/mean")  # the rule reward, before any KL penalty
    row["response_length_mean"] = response_mean
    row["response_length_max"] = _num(data, "response_length/max")
    row["response_clipped_fraction"] = _num(data, "response_length/clip_ratio")
    mfu = _num(data, "perf/mfu/actor")  # actor update only; verl reports 0 for a GPU whose peak it lacks
    row["framework_mfu"] = mfu if mfu > 0 else math.nan
    # actor/perf/..., critic/perf/...: each worker's torch peak since start, in GiB.
    memory = [float(v) for k, v in data.items() if k.endswith("perf/max_memory_allocated_gb") and v is not None]
    # 0 on the CPU lane, whose device has no allocator to ask: absent, not zero.
    row["peak_device_memory_gb"] = max(memory) * GIB_IN_GB if memory and max(memory) > 0 else math.nan
    row["peak_host_rss_gb"] = math.nan  # verl logs system-wide used memory, not the trainer's RSS
    row["eval_accuracy"] = eval_accuracy(data)
    row["time_eval_s"] = _num(data, "timing_s/testing")  # after verl's step timer, before its log
    return row


def eval_accuracy(data: dict[str, Any]) -> float:
    """verl's validation score on a step that validated: <section>/<data_source>/reward/mean@1, the mean of the
    custom reward (rlbench's) over the held-out problems, one response each; NaN on other steps. verl files it
    under val-aux when its reward loop also reports an `acc` (then val-core's), under val-core otherwise."""
    found = [v for k, v in data.items() if k.startswith(("val-core/", "val-aux/")) and k.endswith("/reward/mean@1")]
    return float(found[0]) if len(found) == 1 and found[0] is not None else math.nan


# Stage spans. verl's trainer drives every stage through Ray: the agent loop's `generate_sequences` and the
# rollout server's `generate` (one call per response), the reward loop's `compute_score`, and the worker group's calls
# (`WorkerDict.actor_rollout_compute_log_prob`, `..._update_actor`, `..._update_weights`, ...). Ray records each
# task with its start and duration, and verl's main_ppo dumps them (`ray.timeline()`) when `ray_kwargs.
# timeline_json_file` is set (config.timeline_settings). The dump is written once, after training ends: a run
# that was killed has none, and its stages are placed end to end as before.
#
# One span per (step, stage): the earliest start to the latest end of that stage's calls in the step, so a
# stage run by many ranks or as many requests is one bar. Steps are counted by the trainer's rollout calls (every
# step starts with `generate_sequences`), the last of them being the last step verl logged; the weight sync that
# ends a step (verl times it as `update_weights` of that step) falls before the next step's rollout, and the one
# before step 1 (the first sync) is in no step. What Ray does not see is not here: verl's advantage computation
# runs in the driver (`adv`). `gen` ends when the last response is generated; verl's own timer also counts the
# agent loop's hand-back through its transfer queue after that, so a gap follows `gen`. Not for verl's one-step-off
# trainer, whose rollout of the next step overlaps this one's training (None there: its stages are placed).

# WorkerDict method (role prefix + worker method) -> stage, first matching rule wins: the ref worker's log-prob
# pass before the actor's, whose name it ends with.
_WORKER_RULES = (
    (lambda m: m.startswith("ref_") and "log_prob" in m, "ref"),
    (lambda m: m.endswith("compute_ref_log_prob"), "ref"),
    (lambda m: m.endswith("compute_log_prob"), "old_log_prob"),
    (lambda m: m.endswith("update_actor"), "update_actor"),
    (lambda m: m.startswith("critic_") and m.endswith(("infer_batch", "compute_values")), "values"),
    (lambda m: m.startswith("critic_") and m.endswith(("train_mini_batch", "update_critic")), "update_critic"),
    (lambda m: m.endswith("update_weights"), "weight_sync"),
    (lambda m: m.endswith("generate_sequences"), "gen"),  # the legacy sync rollout on the workers
)
ROLLOUT_CALL = "generate_sequences"  # the agent loop's (or the workers') rollout call: one (per worker) a step


def stage_of(task: str) -> str | None:
    """rlbench's stage of one Ray task name ('Class.method'), or None for calls that are no stage."""
    cls, _, method = task.rpartition(".")
    if cls.endswith("WorkerDict"):
        return next((stage for rule, stage in _WORKER_RULES if rule(method)), None)
    if method == ROLLOUT_CALL:
        return "gen"
    if method == "generate" and cls.endswith("Server"):  # vLLMHttpServer, SGLangHttpServer: one response each
        return "gen"
    if method == "compute_score" and cls.endswith("RewardLoopWorker"):
        return "reward"
    return None


def _calls(events: list[Any]) -> list[tuple[str, str, str, float, float]]:
    """(task, stage, worker, start s, end s) of the timeline's stage calls; unreadable events are skipped."""
    calls = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X" or not str(event.get("cat", "")).startswith("task::"):
            continue
        task = event["cat"][len("task::") :]
        stage = stage_of(task)
        try:
            start, duration = float(event["ts"]) / 1e6, float(event["dur"]) / 1e6  # Ray stamps in microseconds
        except (KeyError, TypeError, ValueError):
            continue
        if stage is not None:
            calls.append((task, stage, str(event.get("tid", "")), start, start + duration))
    return calls


def _step_starts(calls: list[tuple[str, str, str, float, float]]) -> list[float]:
    """Each step's start: its rollout call (the k-th call of each worker that makes one is step k's)."""
    by_worker: dict[str, list[float]] = {}
    for task, _, worker, start, _ in calls:
        if task.rpartition(".")[2] == ROLLOUT_CALL:
            by_worker.setdefault(worker, []).append(start)
    rounds = max((len(starts) for starts in by_worker.values()), default=0)
    return [min(sorted(s)[k] for s in by_worker.values() if len(s) > k) for k in range(rounds)]


def _rounds(count: int, last_step: int | None, evaluated: frozenset[int]) -> list[tuple[int, bool]]:
    """(step, is validation) of each of the timeline's `count` rollout rounds: a step that validated (an
    eval_accuracy target's evaluation, verl's _validate) makes a second round after its own, whose calls are no
    training stage. Numbered back from `last_step` where known (Ray may drop the oldest events), else from 1."""
    rounds: list[tuple[int, bool]] = []
    step = 0
    while len(rounds) < count if last_step is None else step < last_step:
        step += 1
        rounds += [(step, False)] + ([(step, True)] if step in evaluated else [])
    if last_step is None:
        return rounds[:count]
    earlier = [(first, False) for first in range(1 - (count - len(rounds)), 1)]  # rounds before step 1 logged
    return (earlier + rounds)[-count:]


def spans_from_timeline(
    events: list[Any], last_step: int | None = None, evaluated: frozenset[int] = frozenset()
) -> pd.DataFrame | None:
    """Ray timeline events -> one span per (step, stage), columns SPAN_COLUMNS; None without a stage call.

    `last_step` numbers the rounds from the end (the timeline's last rollout is the last step verl logged),
    so a timeline whose oldest events Ray dropped still gets its steps right; without it they count from 1.
    `evaluated`: the steps that ran verl's validation, whose extra rollout round is left out."""
    calls = _calls(events)
    starts = _step_starts(calls)
    if not starts:
        return None
    rounds = _rounds(len(starts), last_step, evaluated)
    spans: dict[tuple[int, str], list[float]] = {}
    for _, stage, _, start, end in calls:
        index = bisect.bisect_right(starts, start)  # rounds begun by then; 0: before step 1 (the first sync)
        if index == 0 or rounds[index - 1][1]:  # validation is no training stage
            continue
        span = spans.setdefault((rounds[index - 1][0], stage), [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    rows = [(step, stage, s0, s1) for (step, stage), (s0, s1) in spans.items()]
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS)).sort_values(["step", "start_unix_s"], ignore_index=True)


def read_spans(
    run_dir: Path, last_step: int | None = None, evaluated: frozenset[int] = frozenset()
) -> pd.DataFrame | None:
    """The run's stage spans from <run>/ray_timeline.json, which verl writes only once training has ended; None
    where there is none (a run killed before the end), it cannot be parsed (a dump cut short), or the run is
    verl's one-step-off trainer."""
    if _one_step_off(run_dir):
        return None
    try:
        events = json.loads((run_dir / TIMELINE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return spans_from_timeline(events, last_step, evaluated) if isinstance(events, list) else None


def _one_step_off(run_dir: Path) -> bool:
    """Whether verl's composed config (saved by Hydra) is the one-step-off trainer's: a separate rollout pool."""
    try:
        config = yaml.safe_load((run_dir / HYDRA_DIR / ".hydra" / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return False
    hybrid = (config or {}).get("actor_rollout_ref", {}).get("hybrid_engine", True)
    return hybrid is False


def role_calls(events: list[Any]) -> list[Call]:
    """The timeline's calls by role for the ledger of a run with a rollout pool of its own (async_roles.py):
    the trainer's worker calls (its update_actor marks each step), each response the rollout servers generated,
    and each weight sync's end on the rollout side (CheckpointEngineWorker.update_weights), which is rollout
    work as well."""
    calls = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X" or not str(event.get("cat", "")).startswith("task::"):
            continue
        task = event["cat"][len("task::") :]
        cls, _, method = task.rpartition(".")
        try:
            start = float(event["ts"]) / 1e6
            end = start + float(event["dur"]) / 1e6
        except (KeyError, TypeError, ValueError):
            continue
        if not (math.isfinite(start) and math.isfinite(end)):
            continue
        if cls.endswith("WorkerDict") and stage_of(task) is not None:
            calls.append(Call("trainer", "update" if method.endswith("update_actor") else "work", start, end))
        elif cls.endswith("CheckpointEngineWorker") and method == "update_weights":
            calls += [Call("rollout", "sync", start, end), Call("rollout", "work", start, end)]
        elif cls.endswith("Server") and method == "generate":
            calls.append(Call("rollout", "response", start, end))
    return calls


def read_roles(run_dir: Path, responses_per_step: int, steps: int) -> dict[str, Any] | None:
    """Per-role busy/idle and staleness of a run with a rollout pool of its own, from Ray's timeline; None for a
    colocated run (one role) or where there is no readable timeline. `steps`: the steps rlbench recorded (the
    fully-async trainer runs one more, unlogged)."""
    if not _one_step_off(run_dir):
        return None
    try:
        events = json.loads((run_dir / TIMELINE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(events, list):
        return None
    return role_ledger(role_calls(events), responses_per_step, "Ray timeline of verl's calls", steps)
