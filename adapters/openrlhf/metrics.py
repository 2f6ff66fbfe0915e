"""OpenRLHF's logged metrics in rlbench's step vocabulary: its TensorBoard scalars, one row per step, and the
stage spans rlbench's hooks stamp in its processes (hooks.py), one row per timed call."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from rlbench.adapters.common import whole_count
from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.async_roles import Call, role_ledger
from rlbench.harness.record.schema import SPAN_COLUMNS, STAGES


def read_scalars(folder: Path) -> dict[int, tuple[dict[str, float], float]]:
    """step -> ({tag: value}, wall-clock time of the step's last scalar) from the folder's event files."""
    if not folder.is_dir() or not any(folder.glob("events.out.tfevents.*")):
        return {}
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise RLBenchError("reading OpenRLHF's metrics needs tensorboard; pip install 'rlbench[openrlhf]'") from None
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()  # a record OpenRLHF is still writing is skipped until complete
    steps: dict[int, tuple[dict[str, float], float]] = {}
    for tag in events.Tags()["scalars"]:
        for point in events.Scalars(tag):
            values, end = steps.setdefault(point.step, ({}, -math.inf))
            values[tag] = float(point.value)  # a step logged twice (a resumed run): the later point wins
            # an evaluation, logged after its step, does not move the step's end
            steps[point.step] = (values, end if tag.startswith("eval/") else max(end, point.wall_time))
    return steps


def _num(values: dict[str, float], key: str) -> float:
    return values.get(f"train/{key}", math.nan)


def normalize(step: int, values: dict[str, float], end_unix_s: float) -> dict[str, float]:
    """One step of OpenRLHF's `train/*` scalars -> one row of rlbench's step vocabulary.

    Sources in OpenRLHF 0.11.2: `timing/*` in trainer/ppo_trainer.py (`train_step`, `fit`) and
    ppo_trainer_async.py (`fit`); `rollout/*` in `_compute_rollout_stats`; the actor's sample
    means `total_length`, `response_length` in trainer/ray/ppo_actor.py (`training_step`).
    """
    step_time = _num(values, "timing/step_total")  # sync: sum of the stage times; async: wall time per step
    responses = whole_count(_num(values, "rollout/num_samples"))
    response_mean = _num(values, "rollout/response_length_mean")
    # Prompt tokens: the actor's mean prompt+response length over its training samples, less the response mean.
    prompt_mean = _num(values, "total_length") - _num(values, "response_length")
    return {
        "step": step,
        "step_time_s": step_time,
        "step_start_unix_s": end_unix_s - step_time,
        "step_end_unix_s": end_unix_s,
        "time_gen_s": _num(values, "timing/generation"),  # vLLM rollout, rewards included
        "time_weight_sync_s": _num(values, "timing/broadcast"),
        # ppo_train: the actor update, and for PPO the critic update (concurrent, or before it when sleeping).
        "time_update_actor_s": _num(values, "timing/ppo_train"),
        # make_experience: the actor's old-log-prob forward pass, with the reference's and critic's passes where
        # the run has them (concurrent Ray calls) and the advantages; OpenRLHF times them as one stage, recorded
        # as the old-log-prob pass (MAKE_EXPERIENCE in the adapter names it in equal_work).
        "time_old_log_prob_s": _num(values, "timing/make_experience"),
        **{f"time_{stage}_s": math.nan for stage in ("reward", "ref", "values", "adv", "update_critic")},
        "num_responses": responses,
        "prompt_tokens": whole_count(prompt_mean * responses),
        "response_tokens": whole_count(response_mean * responses),
        "reward_mean": _num(values, "rollout/reward_mean"),  # the rule reward, before any KL penalty
        "response_length_mean": response_mean,
        # OpenRLHF logs the mean and the truncated share, not the longest (read_steps takes it from its samples)
        "response_length_max": math.nan,
        "response_clipped_fraction": _num(values, "rollout/truncated_rate"),
        "framework_mfu": math.nan,
        "peak_device_memory_gb": math.nan,
        "peak_host_rss_gb": math.nan,  # not logged
    }


def eval_accuracy(values: dict[str, float]) -> float:
    """OpenRLHF's evaluation on a step that ran one: eval/eval_<datasource>_pass1, the mean over the held-out
    problems of the reward hook's score (rlbench's), one sample each at n_samples_per_prompt 1; NaN elsewhere."""
    found = [v for k, v in values.items() if k.startswith("eval/eval_") and k.endswith("_pass1")]
    return found[0] if len(found) == 1 else math.nan


def _span(line: object) -> dict[str, object] | None:
    """One span line as a SPAN_COLUMNS row, or None for what is not one (a partial or foreign line)."""
    if not isinstance(line, dict) or line.get("stage") not in STAGES:
        return None
    step, start, end = line.get("step"), line.get("start_unix_s"), line.get("end_unix_s")
    if not isinstance(step, int) or step < 1 or not all(isinstance(t, int | float) for t in (start, end)):
        return None
    if not (math.isfinite(start) and math.isfinite(end) and start <= end):
        return None
    return {"step": step, "stage": line["stage"], "start_unix_s": float(start), "end_unix_s": float(end)}


def _json_lines(path: Path) -> Iterator[object]:
    """Each line of the span log that parses as JSON; a line cut short (the process killed mid-write) or
    unreadable is skipped."""
    if not path.is_file():
        return
    for text in path.read_text(errors="replace").splitlines():
        try:
            yield json.loads(text)
        except json.JSONDecodeError:
            continue


def _forward(line: object) -> tuple[int, int, int] | None:
    """One "forward" line (hooks.log_forward) as (step, rows, width), or None for what is not one."""
    shape = line.get("forward") if isinstance(line, dict) else None
    if not isinstance(shape, dict):
        return None
    fields = (line.get("step"), shape.get("rows"), shape.get("width"))
    if not all(isinstance(value, int) and value > 0 for value in fields):
        return None
    return fields


def read_forward_widths(path: Path) -> dict[int, float]:
    """{step: the mean width, in tokens, at which the policy's forward passes of that step computed each row}
    (rows x width summed over the step's calls, over its rows), from the span log's "forward" lines (hooks.py:
    OpenRLHF without packing pads each batch to its longest sequence); {} where none was logged. A damaged
    line is skipped."""
    cells: dict[int, list[float]] = {}
    for step, rows, width in filter(None, map(_forward, _json_lines(path))):
        total = cells.setdefault(step, [0.0, 0.0])
        total[0], total[1] = total[0] + rows * width, total[1] + rows
    return {step: positions / rows for step, (positions, rows) in cells.items()}


def read_response_lengths(path: Path) -> dict[int, list[int]]:
    """{step: each response's generated tokens}, from the span log's "lengths" lines (hooks.log_lengths); {}
    where none was logged. A damaged line is skipped."""
    lengths: dict[int, list[int]] = {}
    for line in _json_lines(path):
        values = line.get("lengths") if isinstance(line, dict) else None
        step = line.get("step") if isinstance(line, dict) else None
        if isinstance(step, int) and isinstance(values, list) and all(isinstance(v, int) and v >= 0 for v in values):
            lengths.setdefault(step, []).extend(values)
    return lengths


def read_span_log(path: Path) -> pd.DataFrame | None:
    """The span log's calls (SPAN_COLUMNS), ordered by start; None when there is none. Each line names its step
    as the trainer counted it when the call began, so no line is placed by time. A line cut short (the
    process killed mid-write) or unreadable is skipped: the calls before it count."""
    rows = [row for row in map(_span, _json_lines(path)) if row is not None]
    if not rows:
        return None
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS)).sort_values(["start_unix_s", "step"], ignore_index=True)


def _async_trainer(resolved: Path) -> bool:
    """Whether OpenRLHF resolved its async trainer for the run (train.async_enable in the saved args)."""
    try:
        train = json.loads(resolved.read_text())["args"]["train"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(train, dict) and train.get("async_enable") is True


def role_calls(path: Path) -> list[Call]:
    """The span log's calls by role for the ledger of an async run (async_roles.py): the trainer's stages (its
    update_actor marks each step, its weight_sync the end of a sync, rollout work as well: vLLM receives the
    broadcast) and, for each gen span, one response per length the sampler logged for that batch."""
    lines = list(_json_lines(path))
    counts = {}
    for line in lines:
        if isinstance(line, dict) and isinstance(line.get("step"), int) and isinstance(line.get("lengths"), list):
            counts[line["step"]] = counts.get(line["step"], 0) + len(line["lengths"])
    calls = []
    for row in filter(None, map(_span, lines)):
        start, end, stage = row["start_unix_s"], row["end_unix_s"], row["stage"]
        if stage == "gen":
            calls += [Call("rollout", "response", start, end)] * counts.get(row["step"], 0)
        elif stage == "update_actor":
            calls.append(Call("trainer", "update", start, end))
        elif stage == "weight_sync":
            calls += [Call("trainer", "work", start, end), Call("rollout", "sync", start, end)]
            calls.append(Call("rollout", "work", start, end))
        else:
            calls.append(Call("trainer", "work", start, end))
    return calls


def read_roles(spans: Path, resolved: Path, responses_per_step: int, steps: int) -> dict | None:
    """Per-role busy/idle and staleness of an async run from rlbench's stage stamps in OpenRLHF's processes;
    None for a synchronous run (its stages do not overlap: the stage ledger holds) or without a span log."""
    if not _async_trainer(resolved):
        return None
    source = "rlbench's stage stamps in OpenRLHF's processes"
    return role_ledger(role_calls(spans), responses_per_step, source, steps)
