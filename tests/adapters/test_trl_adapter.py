"""TRL adapter, CPU side: the generated config is accepted by TRL's own GRPOConfig; refusals."""

from __future__ import annotations

import pytest

from rlbench.adapters.registry import get_adapter
from rlbench.errors import RLBenchError
from rlbench.run.parallel import Parallelism
from rlbench.run.spec import RunSpec
from rlbench.workloads.catalog import load_workload

trl = pytest.importorskip("trl")


def _spec(workload: str = "gsm8k-grpo-tiny", **parallel) -> RunSpec:
    return RunSpec(framework="trl", workload=load_workload(workload), parallel=Parallelism(**parallel))


@pytest.mark.parametrize("workload", ["gsm8k-grpo-tiny", "math-grpo-tiny", "gsm8k-grpo", "math-grpo"])
def test_config_is_accepted_by_trl_grpo_config(workload, tmp_path):
    spec = _spec(workload)
    kwargs = get_adapter("trl").grpo_config(spec, tmp_path)
    config = trl.GRPOConfig(**kwargs)  # TRL's own dataclass validation (batch/generation divisibility etc.)
    w = spec.workload
    assert config.num_generations == w.algorithm.group_size
    assert config.max_completion_length == w.max_response_length
    # One RL step = all mini-batches x epochs of optimiser updates over one generation batch.
    assert config.max_steps == w.steps * w.updates_per_step
    assert config.generation_batch_size == w.responses_per_step
    assert config.generation_kwargs == ({"min_new_tokens": w.max_response_length} if w.fixed_length else None)


def test_dry_run_plan_names_the_launcher_and_config(tmp_path):
    from rlbench.run.inputs import RunInputs

    plan = get_adapter("trl").plan(_spec(), RunInputs(model="/m", prompts=[]), tmp_path)
    assert plan.argv[1:3] == ["-m", "rlbench.adapters.trl.launcher"]
    assert '"num_generations": 4' in plan.describe() and "trl_launch.json" in plan.files


@pytest.mark.parametrize(
    "workload,parallel,message",
    [
        ("gsm8k-ppo", {}, "has no PPO trainer"),
        ("gsm8k-grpo-tiny", {"tp": 2}, "tp=2: TRL 1.16's GRPOConfig has no trainer tensor parallelism"),
        ("gsm8k-grpo-tiny", {"pp": 2}, "pp=2: TRL 1.16 trains through accelerate .* no pipeline parallelism"),
        ("gsm8k-grpo-tiny", {"cp": 2}, "cp=2: TRL 1.16's GRPOTrainer refuses context parallelism"),
        ("gsm8k-grpo-tiny", {"sp": 2}, "sp=2: TRL 1.16's GRPOTrainer refuses sequence parallelism"),
        ("gsm8k-grpo-tiny", {"ep": 2, "dp": 2}, "ep=2: TRL 1.16 has no expert parallelism"),
        ("gsm8k-grpo-tiny", {"fuse": ("on_policy_old",)}, "fuse=on_policy_old: TRL 1.16 decides itself"),
        ("gsm8k-grpo-tiny", {"async_": "one-step"}, "async=one-step: TRL 1.16's asynchronous GRPO is experimental"),
        ("gsm8k-grpo-tiny", {"placement": "disaggregated"}, "colocated only"),
    ],
)
def test_unsupported_settings_are_refused_before_launch(workload, parallel, message):
    with pytest.raises(RLBenchError, match=message):
        get_adapter("trl").check(_spec(workload, **parallel))


def test_gpu_knobs_are_refused_without_gpus(monkeypatch):
    import rlbench.adapters.trl.adapter as module

    monkeypatch.setattr(module, "gpus", lambda: ([], None))
    with pytest.raises(RLBenchError, match="dp=2: needs 2 GPUs, this machine has 0"):
        get_adapter("trl").check(_spec(dp=2))
    with pytest.raises(RLBenchError, match="rollout_tp=2: TRL's rollout tensor parallelism is vLLM's"):
        get_adapter("trl").check(_spec(rollout_tp=2))


def test_not_installed_framework_is_refused(monkeypatch):
    adapter = get_adapter("trl")
    monkeypatch.setattr(type(adapter), "version", lambda self: None)
    with pytest.raises(
        RLBenchError, match=r"framework 'trl' is not installed; install it with pip install 'rlbench\[trl\]'"
    ):
        adapter.check(_spec())


def test_model_shape_is_what_trl_launches_on_this_cpu():
    from rlbench.run.environment import gpus

    if gpus()[0]:
        pytest.skip("the CPU launch only")
    workload = load_workload("gsm8k-grpo-tiny")
    shape = get_adapter("trl").model_shape(RunSpec(framework="trl", workload=workload, parallel=Parallelism()))
    # HF generate over G repeated rows with a concatenated cache, one micro-batch per mini-batch, fp32 on a CPU
    assert shape == {
        "micro_batch_size": workload.mini_batch_prompts * workload.algorithm.group_size,
        "shared_prefill": False,
        "dtype_bytes": 4,
        "kv_cache": "concat",
    }
