"""TRL adapter, CPU side: the generated config is accepted by TRL's own GRPOConfig; refusals."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.runspec import RunSpec
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
    from rlbench.harness.spec.inputs import RunInputs

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
    from rlbench.harness.spec.environment import gpus

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


def _resolved_by_trl(spec: RunSpec, run_dir, generation=None, **changed):
    """The launcher's dump of TRL's own GRPOConfig (built from the adapter's arguments, `changed` applied)."""
    from rlbench.adapters.trl import launcher
    from rlbench.adapters.trl.config import RESOLVED_FILE

    config = trl.GRPOConfig(**{**get_adapter("trl").grpo_config(spec, run_dir), **changed})
    launcher.write_resolved(run_dir / RESOLVED_FILE, config, generation)
    return run_dir / RESOLVED_FILE


def test_the_record_reads_the_contract_back_from_trls_resolved_config(tmp_path):
    """After a run, equal_work states what TRL itself resolved (the launcher's trl_resolved.json)."""
    from transformers import GenerationConfig

    from rlbench.adapters.trl import launcher

    spec = _spec()
    trainer = type("Trainer", (), {"use_vllm": False, "generation_config": GenerationConfig(max_new_tokens=32)})
    saved = _resolved_by_trl(spec, tmp_path, launcher.generation_settings(trainer))
    assert json.loads(saved.read_text())["generation"]["generation_config"]["max_new_tokens"] == 32
    launched = get_adapter("trl").equal_work(spec)
    record = get_adapter("trl").equal_work(spec, tmp_path)
    assert record["resolved"]["source"] == str(saved) and "resolved_missing" not in record
    assert record["applied"] and record["resolved"]["values"] == {t: record["contract"][t] for t in record["applied"]}
    assert record["differences"] == launched["differences"] and record["applied"] == launched["applied"]


def test_a_setting_trl_resolved_otherwise_is_a_named_difference(tmp_path):
    spec = _spec()
    checkpointing = spec.workload.gradient_checkpointing
    _resolved_by_trl(spec, tmp_path, gradient_checkpointing=not checkpointing)
    record = get_adapter("trl").equal_work(spec, tmp_path)
    assert "train.gradient_checkpointing" not in record["applied"]
    assert record["differences"]["train.gradient_checkpointing"] == (
        f"no reason named (the framework resolved gradient_checkpointing={not checkpointing}; "
        f"launched gradient_checkpointing={checkpointing})"
    )


def test_the_vllm_engine_trl_built_is_what_is_read_back(tmp_path, monkeypatch):
    """With vLLM, the engine settings TRL passed to vLLM (not only its args) are read back."""
    import rlbench.adapters.trl.adapter as module
    from rlbench.adapters.trl import launcher

    monkeypatch.setattr(module, "gpus", lambda: ([{"name": "GPU"}], None))
    monkeypatch.setattr(module.TRLAdapter, "_use_vllm", lambda self: True)
    spec = _spec()
    engine = type("Engine", (), {"gpu_memory_utilization": 0.9, "enable_sleep_mode": True, "max_num_seqs": 16})
    generation = launcher.generation_settings(type("Trainer", (), {"use_vllm": True, "vllm_generation": engine}))
    assert generation["vllm"]["max_num_seqs"] == 16 and generation["vllm"]["mode"] is None
    _resolved_by_trl(spec, tmp_path, generation)  # args say 0.5 (the contract), the engine got 0.9
    record = get_adapter("trl").equal_work(spec, tmp_path)
    assert record["resolved"]["values"]["engine.sleep_mode"] is True and "engine.sleep_mode" in record["applied"]
    assert record["differences"]["engine.gpu_memory_utilization"].startswith(
        "no reason named (the framework resolved vllm_gpu_memory_utilization=0.9; launched"
    )


@pytest.mark.parametrize(
    "content,why",
    [
        (None, "trl_resolved.json not written"),
        ('{"trl": "1.16.0", "args": {"gradient_check', "trl_resolved.json unreadable (JSONDecodeError"),
        ('["args"]', "trl_resolved.json holds no TRL args"),
        (b"\xff\xfe", "trl_resolved.json unreadable (UnicodeDecodeError"),
    ],
)
def test_a_missing_or_damaged_resolved_file_leaves_the_launch_manifest(tmp_path, content, why):
    from rlbench.adapters.trl.config import RESOLVED_FILE

    if isinstance(content, bytes):
        (tmp_path / RESOLVED_FILE).write_bytes(content)
    elif content is not None:
        (tmp_path / RESOLVED_FILE).write_text(content)
    record = get_adapter("trl").equal_work(_spec(), tmp_path)
    assert "resolved" not in record and record["resolved_missing"].startswith(why)
    assert {k: v for k, v in record.items() if k != "resolved_missing"} == get_adapter("trl").equal_work(_spec())


def test_the_readme_gpu_recipe_is_inside_trls_own_vllm_range():
    """The README's TRL recipe pins the installed TRL and a vLLM its own [vllm] extra accepts."""
    import importlib.metadata

    from packaging.specifiers import SpecifierSet

    from rlbench.adapters.trl.machine import TESTED_VLLM, vllm_range
    from tests.conftest import readme_pins

    named = readme_pins("python -m venv ~/venv-trl", "# trl: usable")
    assert named == {"trl": importlib.metadata.version("trl"), "vllm": TESTED_VLLM}
    assert vllm_range() and SpecifierSet(vllm_range()).contains(TESTED_VLLM)


@pytest.mark.parametrize(
    "vllm,usable,why",
    [
        (None, True, "transformers generate"),
        ("0.29.0", True, "vLLM 0.29.0 rollout"),
        ("0.35.0", False, "vLLM 0.35.0 is installed, but TRL .* supports vllm.*pip install 'trl\\[vllm\\]=="),
    ],
)
def test_a_gpu_machine_with_a_vllm_trl_does_not_support_is_refused(monkeypatch, vllm, usable, why):
    import re

    import rlbench.adapters.trl.adapter as module

    real = module.package_version
    monkeypatch.setattr(module, "gpus", lambda: ([{"index": 0}], None))
    fake = lambda name: vllm if name == "vllm" else real(name)  # noqa: E731
    monkeypatch.setattr(module, "package_version", fake)
    monkeypatch.setattr("rlbench.adapters.trl.machine.package_version", fake)
    ok, reason = get_adapter("trl").usable_here()
    assert ok is usable and re.search(why, reason), reason


def test_an_eval_target_turns_on_trls_own_evaluation_every_eval_every_rl_steps(tmp_path):
    spec = _spec("gsm8k-format-grpo-tiny-eval")
    config = trl.GRPOConfig(**get_adapter("trl").grpo_config(spec, tmp_path))  # TRL's own checks
    w = spec.workload
    assert config.eval_strategy == "steps" and config.eval_steps == w.target.eval_every * w.updates_per_step
    assert config.num_generations_eval == 1 and config.per_device_eval_batch_size == w.target.eval_problems
    assert config.temperature == w.sampling.temperature  # TRL evaluates with its training generation config
    evaluation = get_adapter("trl").evaluation(spec)
    assert "eval_reward" in evaluation["hook"] and "decoding" in evaluation["differences"]
    plain = get_adapter("trl").grpo_config(_spec("gsm8k-format-grpo-tiny"), tmp_path)
    assert "eval_strategy" not in plain and get_adapter("trl").evaluation(_spec("gsm8k-format-grpo-tiny")) is None


def test_trls_eval_reward_lands_on_the_step_it_evaluated(tmp_path):
    from rlbench.adapters.trl.metrics import with_evaluations

    steps = pd.DataFrame({"step": [4, 5, 6], "reward_mean": [0.1, 0.2, 0.3]})
    evaluations = [{"step": 5, "eval": {"eval_reward": 0.625, "eval_loss": 0.0}}]
    assert with_evaluations(steps, evaluations)["eval_accuracy"].fillna(-1).tolist() == [-1, 0.625, -1]
    assert "eval_accuracy" not in with_evaluations(steps, [])  # a run without evaluation: no column
