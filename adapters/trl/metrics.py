"""TRL's logged metrics in rlbench's step vocabulary: one line of the launch process's log callback becomes one row."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rlbench.adapters.common import length_quantiles

# TRL stage -> rlbench stage column. "make_experience" is used to derive the update time.
_STAGES = {"gen": "time_gen_s", "reward": "time_reward_s", "old_log_prob": "time_old_log_prob_s", "ref": "time_ref_s"}


def normalize(line: dict[str, Any]) -> dict[str, float]:
    """One launcher line -> one row of rlbench's step vocabulary."""
    stages = line.get("stages_s", {})
    tokens = line.get("tokens", {})
    trl = line.get("trl", {})
    row: dict[str, float] = {
        "step": line["step"],
        "step_time_s": line["step_time_s"],
        "step_start_unix_s": line["step_start_unix_s"],
        "step_end_unix_s": line["step_end_unix_s"],
    }
    for stage, column in _STAGES.items():
        row[column] = stages.get(stage, math.nan)
    # Everything in the step that is not making experience is the policy update (forward, backward, optimizer).
    row["time_update_actor_s"] = line["step_time_s"] - stages.get("make_experience", 0.0)
    row["prompt_tokens"] = tokens.get("prompt", math.nan)
    row["padded_prompt_tokens"] = tokens.get("prompt_padded", math.nan)
    row["response_tokens"] = tokens.get("response", math.nan)
    row["num_responses"] = tokens.get("responses", math.nan)
    row["reward_mean"] = trl.get("reward", math.nan)
    row["response_length_mean"] = trl.get("completions/mean_length", math.nan)
    row["response_length_max"] = trl.get("completions/max_length", math.nan)
    row["response_clipped_fraction"] = trl.get("completions/clipped_ratio", math.nan)
    row.update(length_quantiles(line.get("response_lengths") or []))
    memory = line.get("memory", {})
    row["peak_host_rss_gb"] = memory.get("peak_host_rss_gb", math.nan)
    device_memory = memory.get("peak_device_memory_gb")
    row["peak_device_memory_gb"] = math.nan if device_memory is None else device_memory
    return row


def with_evaluations(steps: pd.DataFrame, evaluations: list[dict[str, Any]]) -> pd.DataFrame:
    """The step rows with `eval_accuracy` on the steps TRL evaluated: its `eval_reward`, the mean over the
    held-out problems of rlbench's reward (the one reward function), one generation each."""
    if steps.empty or not evaluations:
        return steps
    accuracy = {int(e["step"]): e["eval"].get("eval_reward") for e in evaluations if isinstance(e.get("eval"), dict)}
    return steps.assign(
        eval_accuracy=[math.nan if accuracy.get(int(s)) is None else float(accuracy[int(s)]) for s in steps["step"]]
    )
