"""verl's logged metrics in rlbench's step vocabulary: one file-logger line (JSON) becomes one row."""

from __future__ import annotations

import math
from typing import Any

from rlbench.adapters.common import whole_count

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
    return row
