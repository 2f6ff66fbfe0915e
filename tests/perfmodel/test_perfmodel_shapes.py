"""Workload and layout validation: every bad value names its field."""

from __future__ import annotations

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape

WORK = {"prompts_per_step": 8, "group_size": 4, "prompt_len": 16, "response_len": 32}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prompts_per_step": 0}, "prompts_per_step"),
        ({"prompt_len": -1}, "prompt_len"),
        ({"algorithm": "dpo"}, "algorithm"),
        ({"mini_batch_prompts": 3}, "mini_batch_prompts"),
        ({"mean_response_len": 10}, "mean_response_len"),  # fixed_length=True
        ({"fixed_length": False, "mean_response_len": 64}, "mean_response_len"),
        ({"gradient_checkpointing": "yes"}, "gradient_checkpointing"),
        ({"ppo_epochs": 0}, "ppo_epochs"),
        ({"micro_batch_tokens": 0}, "micro_batch_tokens"),
    ],
)
def test_workload_errors_name_field(change: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"WorkloadShape\.{field}"):
        WorkloadShape(**{**WORK, **change})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"gpus": 8, "dp": 3}, "dp"),
        ({"gpus": 8, "tp": 3}, "tp"),
        ({"gpus": 8, "rollout_tp": 3}, "rollout_tp"),
        ({"gpus": 8, "placement": "split"}, "placement"),
        ({"gpus": 8, "async_mode": "two-step"}, "async_mode"),
        ({"gpus": 8, "placement": "disaggregated"}, "rollout_gpus"),
        ({"gpus": 8, "rollout_gpus": 4}, "rollout_gpus"),
        ({"gpus": 0}, "gpus"),
        ({"gpus": 8, "sharding": "zero2"}, "sharding"),
        ({"gpus": 8, "placement": "disaggregated", "rollout_gpus": 4, "tp": 8}, "tp"),
    ],
)
def test_parallel_errors_name_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"ParallelShape\.{field}"):
        ParallelShape(**kwargs)


def test_derived_quantities() -> None:
    work = WorkloadShape(**WORK, fixed_length=False, mean_response_len=20.0, mini_batch_prompts=2, ppo_epochs=2)
    assert (work.sequences, work.mean_seq_len, work.tokens_per_step) == (32, 36.0, 32 * 36.0)
    assert (work.mini_batches, work.optimizer_steps) == (4, 8)
    par = ParallelShape(gpus=16, tp=2, pp=2, placement="disaggregated", rollout_gpus=8, rollout_tp=4)
    assert (par.trainer_gpus, par.data_parallel, par.rollout_pool_gpus, par.rollout_replicas) == (8, 2, 8, 2)
