"""OpenRLHF adapter, CPU side, against the installed OpenRLHF (a `pip install --no-deps openrlhf==0.11.2`).

- the generated flags are parsed by OpenRLHF's own `train_ppo_ray` parser and checked by its own
  post-parse validation and `train()` placement code: the installed file runs as `__main__`, with
  Ray, DeepSpeed and vLLM replaced by recorders (as OpenRLHF's own tests/test_agent.py does);
- OpenRLHF's own `PromptDataset` reads the converted JSONL, and OpenRLHF's own single-turn
  executor (and the fixed-length one built on it) scores through the rlbench reward hook;
- `read_steps` maps TensorBoard event files written by OpenRLHF's own `TensorboardLogger`;
- refusals, the dry-run command, and the no-GPU refusal of a real launch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import math
import runpy
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest

import rlbench.adapters.openrlhf.adapter as module
from rlbench.adapters import prelaunch
from rlbench.adapters.openrlhf import config as openrlhf_config  # noqa: E402
from rlbench.adapters.openrlhf import launcher as openrlhf_launch  # noqa: E402
from rlbench.adapters.openrlhf.reward import reward_func
from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.catalog import available_workloads, load_workload
from rlbench.workloads.prompts import PromptRecord, write_prompts
from rlbench.workloads.rewards import score
from tests.conftest import run_cli

RUN_DIR = Path("/runs/20260101T000000Z-openrlhf-x-abc123")
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
DISAGG = {"placement": "disaggregated"}
FULL_SIZE = [w for w in available_workloads() if load_workload(w).model.tiny is None]  # bf16, OpenRLHF's GPU path


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    """Shape checks only: the machine's own GPU count (and CPU lane) never decides these tests."""
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 0)
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: False)


def _spec(workload: str = "gsm8k-grpo", **parallel) -> RunSpec:
    return RunSpec(framework="openrlhf", workload=load_workload(workload), parallel=Parallelism(**parallel))


def _openrlhf_root() -> Path:
    found = importlib.util.find_spec("openrlhf")
    if found is None:
        pytest.skip("openrlhf is not installed (pip install --no-deps 'openrlhf==0.11.2')")
    return Path(list(found.submodule_search_locations)[0])


def _load(name: str, path: Path, monkeypatch) -> types.ModuleType:
    """One OpenRLHF source file as module `name`, without importing its package's heavy __init__."""
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, loaded)
    spec.loader.exec_module(loaded)
    return loaded


# ---------------------------------------------------------------- OpenRLHF's own parser and placement


class _PlacementGroup:
    def __init__(self, bundles, strategy):
        self.gpus = sum(b["GPU"] for b in bundles)

    def ready(self):
        return None


def run_train_ppo_ray(flags: list[str], monkeypatch) -> SimpleNamespace:
    """Run the installed `openrlhf/cli/train_ppo_ray.py` as `python -m` would, recording what it asks Ray for."""
    root = _openrlhf_root()
    seen = SimpleNamespace(args=None, groups=[], engines=None, trainer=None)

    def get_strategy(args):
        seen.args = args
        return MagicMock()

    def actor_group(num_nodes, num_gpus_per_node, actor_cls, pg=None, num_gpus_per_actor=1, duplicate_actors=1):
        seen.groups.append(
            SimpleNamespace(role=actor_cls, gpus=num_nodes * num_gpus_per_node, pg=pg, duplicate=duplicate_actors)
        )
        return MagicMock()

    def create_vllm_engines(
        num_engines,
        tp,
        pretrain,
        seed,
        full_determinism,
        prefix_caching,
        enforce_eager,
        max_len,
        shared_pg=None,
        gpu_memory_utilization=None,
        enable_sleep=False,
        *rest,
        **kw,
    ):
        seen.engines = SimpleNamespace(
            count=num_engines,
            tp=tp,
            pg=shared_pg,
            memory=gpu_memory_utilization,
            sleep=enable_sleep,
            max_len=max_len,
            **kw,
        )
        return [MagicMock()] * num_engines

    def trainer(kind):
        def remote(*args, **kwargs):
            seen.trainer = SimpleNamespace(kind=kind, kwargs=kwargs)
            return MagicMock()

        return types.SimpleNamespace(remote=remote)

    ray = MagicMock()
    ray.is_initialized.return_value = True
    stubs = {
        "ray": ray,
        "ray.util": MagicMock(),
        "ray.util.placement_group": SimpleNamespace(placement_group=_PlacementGroup),
        "openrlhf.trainer.ray": SimpleNamespace(create_vllm_engines=create_vllm_engines),
        "openrlhf.trainer.ray.launcher": SimpleNamespace(
            RayActorGroup=actor_group, ReferenceModelActor="ref", RewardModelActor="reward"
        ),
        "openrlhf.trainer.ray.ppo_actor": SimpleNamespace(PolicyModelActor="actor"),
        "openrlhf.trainer.ray.ppo_critic": SimpleNamespace(CriticModelActor="critic"),
        "openrlhf.trainer.ppo_trainer": SimpleNamespace(PPOTrainer=trainer("sync")),
        "openrlhf.trainer.ppo_trainer_async": SimpleNamespace(PPOTrainerAsync=trainer("async")),
        "openrlhf.utils": SimpleNamespace(get_strategy=get_strategy),
    }
    for name, stub in stubs.items():
        monkeypatch.setitem(sys.modules, name, stub)
    _load("openrlhf.utils.config", root / "utils" / "config.py", monkeypatch)  # hierarchize: stdlib only
    monkeypatch.setattr(sys, "argv", ["train_ppo_ray.py", *flags])
    runpy.run_path(str(root / "cli" / "train_ppo_ray.py"), run_name="__main__")
    return seen


def _requested_gpus(seen: SimpleNamespace) -> int:
    """GPUs the run asks Ray for: placement groups once, groups and engines outside them each."""
    groups = {id(g.pg): g.pg.gpus for g in seen.groups if g.pg is not None}
    if seen.engines.pg is not None:
        groups[id(seen.engines.pg)] = seen.engines.pg.gpus
    free = sum(g.gpus for g in seen.groups if g.pg is None)
    engines = seen.engines.count * seen.engines.tp if seen.engines.pg is None else 0
    return sum(groups.values()) + free + engines


def _assert_workload_lands(args, spec: RunSpec) -> None:
    w, a = spec.workload, spec.workload.algorithm
    assert args.actor.model_name_or_path == MODEL and args.ds.param_dtype == "bf16"
    assert args.algo.advantage.estimator == ("group_norm" if a.name == "grpo" else "gae")
    assert args.critic.model_name_or_path == (MODEL if a.name == "ppo" else None)
    assert args.rollout.n_samples_per_prompt == a.group_size and args.train.max_epochs == a.epochs
    assert args.algo.kl.init_coef == a.kl_coef and args.algo.kl.target is None  # fixed KL coefficient
    assert args.algo.kl.use_loss is (a.name == "grpo" and a.kl_coef > 0)
    assert args.algo.kl.estimator == ("k3" if args.algo.kl.use_loss else "k1")
    assert args.actor.eps_clip_low_high == (a.clip_ratio, a.clip_ratio)  # filled in by OpenRLHF from eps_clip
    assert args.actor.adam.lr == a.learning_rate and args.actor.lr_scheduler == "constant"
    assert args.actor.lr_warmup_ratio == 0
    assert args.rollout.batch_size == w.prompts_per_step
    assert args.train.batch_size == w.mini_batch_prompts * a.group_size
    assert args.train.dynamic_batch_enable and args.ds.packing_samples
    assert args.train.max_tokens_per_gpu == args.rollout.max_tokens_per_gpu >= args.data.max_len
    assert args.data.max_len == w.max_prompt_length + w.max_response_length
    assert args.rollout.max_new_tokens == w.max_response_length
    assert (args.rollout.temperature, args.rollout.top_p) == (w.sampling.temperature, w.sampling.top_p)
    assert args.actor.gradient_checkpointing_enable is w.gradient_checkpointing
    assert args.data.apply_chat_template is w.prompt.chat
    assert args.data.prompt_dataset == str(RUN_DIR / openrlhf_config.JSONL_FILE)
    assert (args.data.input_key, args.data.label_key) == ("input", "label")
    if w.fixed_length:  # the agent hook replaces the reward URL ("agent") and scores through reward_func itself
        assert args.train.agent_func_path == str(openrlhf_config.REWARD_FILE) and args.reward.remote_url == ["agent"]
    else:
        assert args.reward.remote_url == [str(openrlhf_config.REWARD_FILE)] and args.train.agent_func_path is None
    assert openrlhf_config.REWARD_FILE.is_file()
    assert args.train.num_episodes == 1 and args.train.seed == spec.seed
    assert args.logger.tensorboard_dir == str(RUN_DIR / openrlhf_config.TENSORBOARD_DIR)
    assert args.logger.wandb.run_name == openrlhf_config.RUN_NAME and args.logger.wandb.key is None  # no wandb
    assert args.eval.dataset is None and args.ckpt.save_steps == -1


def _assert_parallel_lands(seen: SimpleNamespace, spec: RunSpec) -> None:
    p, args = spec.parallel, seen.args
    trainer, critic, rollout = get_adapter("openrlhf").gpu_layout(spec)
    roles = {g.role: g for g in seen.groups}
    assert set(roles) == {"actor"} | ({"ref"} if spec.workload.algorithm.kl_coef > 0 else set()) | (
        {"critic"} if spec.workload.algorithm.name == "ppo" else set()
    )  # no reward model: a rule reward
    # DeepSpeed's data-parallel ranks: OpenRLHF duplicates each actor over its ring (cp) and TP groups.
    assert all(g.gpus == p.dp * p.tp * p.cp and g.duplicate == p.cp * p.tp for g in seen.groups)
    assert (args.ds.ring_attn_size, args.ds.tensor_parallel_size) == (p.cp, p.tp)
    assert args.ds.zero_stage == (2 if p.tp > 1 else 3)  # DeepSpeed's AutoTP refuses ZeRO-3
    assert (seen.engines.count * seen.engines.tp, seen.engines.tp) == (rollout or trainer, p.rollout_tp)
    assert seen.trainer.kind == ("async" if p.async_depth else "sync")
    assert args.train.async_queue_size == max(1, p.async_depth)  # OpenRLHF's default 1 when not async
    if p.placement == "colocated":
        pg = roles["actor"].pg
        assert pg is not None and all(g.pg is pg for g in seen.groups) and seen.engines.pg is pg
        assert seen.engines.sleep and args.ds.enable_sleep and seen.engines.memory == 0.5
    else:
        assert seen.engines.pg is None and not seen.engines.sleep
        assert "critic" not in roles or roles["critic"].pg is None  # the critic gets GPUs of its own
    assert _requested_gpus(seen) == trainer + critic + rollout  # what the adapter's GPU check counts


@pytest.mark.parametrize("workload", FULL_SIZE)
@pytest.mark.parametrize(
    "mode",
    [
        {},
        {"dp": 2, "rollout_tp": 2, **DISAGG},
        {"dp": 2, **DISAGG, "async_": "one-step"},
        {"dp": 2, "tp": 2, "cp": 2, **DISAGG, "async_": "3"},
    ],
    ids=["colocated", "disaggregated", "async", "tp-cp-3-step"],
)
def test_every_workload_parses_and_places_with_openrlhfs_own_cli(workload, mode, monkeypatch):
    spec = _spec(workload, **mode)
    get_adapter("openrlhf").check(spec)
    seen = run_train_ppo_ray(get_adapter("openrlhf").flags(spec, MODEL, RUN_DIR), monkeypatch)
    _assert_workload_lands(seen.args, spec)
    _assert_parallel_lands(seen, spec)


@pytest.mark.parametrize("placement", ["colocated", "disaggregated"])
@pytest.mark.parametrize("cp", [1, 2])
@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("rollout_tp", [1, 2, 4])
@pytest.mark.parametrize("dp", [1, 2, 8])
def test_parallelism_grid_parses_or_is_refused(dp, rollout_tp, tp, cp, placement, monkeypatch):
    spec = _spec("gsm8k-ppo", dp=dp, rollout_tp=rollout_tp, tp=tp, cp=cp, placement=placement)
    if rollout_tp == 4:  # Qwen2.5-0.5B-Instruct has 14 attention heads
        with pytest.raises(
            RLBenchError, match="rollout_tp=4: model Qwen2.5-0.5B-Instruct .* does not divide its 14 attention"
        ):
            get_adapter("openrlhf").check(spec)
        return
    if placement == "colocated" and (dp * tp * cp) % rollout_tp:
        with pytest.raises(RLBenchError, match=f"rollout_tp={rollout_tp}: .* must divide {dp * tp * cp}"):
            get_adapter("openrlhf").check(spec)
        return
    get_adapter("openrlhf").check(spec)
    _assert_parallel_lands(run_train_ppo_ray(get_adapter("openrlhf").flags(spec, MODEL, RUN_DIR), monkeypatch), spec)


def test_openrlhfs_parser_rejects_a_misspelt_flag(monkeypatch):
    """The harness is a real check: OpenRLHF's parser exits on a flag it does not define."""
    flags = get_adapter("openrlhf").flags(_spec(), MODEL, RUN_DIR)
    with pytest.raises(SystemExit):
        run_train_ppo_ray([f.replace("--vllm.num_engines", "--vllm_num_engines") for f in flags], monkeypatch)


# ---------------------------------------------------------------- data and reward through OpenRLHF's code


@pytest.fixture(scope="session")
def tiny_tokenizer(model_cache):
    from transformers import AutoTokenizer

    from rlbench.workloads.spec import TinyModelSpec
    from rlbench.workloads.tiny_model import build_tiny_model

    corpus = ["Janet has 16 eggs and eats 3. How many are left? #### 13", "So the answer is \\boxed{42}."] * 40
    return AutoTokenizer.from_pretrained(build_tiny_model(TinyModelSpec(vocab_size=400, num_layers=2), corpus, 0))


def _records() -> list[PromptRecord]:
    return [
        PromptRecord(uid=f"gsm8k-{i}", dataset="gsm8k", prompt=f"What is {i} + {i}?", ground_truth=str(2 * i))
        for i in range(3)
    ]


CHAT_TEMPLATE = "{% for m in messages %}<|user|>{{ m.content }}{% endfor %}<|assistant|>"


@pytest.mark.parametrize("chat", [True, False])
def test_jsonl_is_read_by_openrlhfs_prompt_dataset(chat, tmp_path, tiny_tokenizer, monkeypatch):
    from datasets import load_dataset

    root = _openrlhf_root()
    if chat:  # the tiny tokenizer has no chat template of its own
        monkeypatch.setattr(tiny_tokenizer, "chat_template", CHAT_TEMPLATE)
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    assert openrlhf_launch.write_jsonl(tmp_path / "prompts.jsonl", tmp_path / openrlhf_config.JSONL_FILE) == 3
    prompts = _load("openrlhf_prompts_dataset", root / "datasets" / "prompts_dataset.py", monkeypatch)
    args = SimpleNamespace(data=SimpleNamespace(input_key="input", label_key="label", apply_chat_template=chat))
    strategy = SimpleNamespace(args=args, is_rank_0=lambda: False)
    data = load_dataset("json", data_files=str(tmp_path / openrlhf_config.JSONL_FILE))[
        "train"
    ]  # as blending_datasets does
    dataset = prompts.PromptDataset(data, tiny_tokenizer, strategy)
    rows = [dataset[i] for i in range(len(dataset))]
    expected = [f"<|user|>{r.prompt}<|assistant|>" if chat else r.prompt for r in _records()]
    assert [prompt for _, prompt, _, _ in rows] == expected
    assert [json.loads(lab) for _, _, lab, _ in rows] == [{"dataset": "gsm8k", "ground_truth": t} for t in "024"]
    assert {source for source, _, _, _ in rows} == {"gsm8k"}


def _agent_module(monkeypatch) -> types.ModuleType:
    root = _openrlhf_root()
    if importlib.util.find_spec("aiohttp") is None:  # used by its HTTP path only, not by reward files
        monkeypatch.setitem(sys.modules, "aiohttp", MagicMock())
    _load("openrlhf.utils.logging_utils", root / "utils" / "logging_utils.py", monkeypatch)  # stdlib only
    return _load("openrlhf.utils.agent", root / "utils" / "agent.py", monkeypatch)


class _Engine:
    """vLLM's generate as OpenRLHF's executor awaits it: one output with token ids and a finish reason."""

    def __init__(self, tokenizer, text: str):
        self.ids, self.params = tokenizer(text, add_special_tokens=False)["input_ids"], []

    async def generate(self, prompt_ids, params, multi_modal_data=None):
        self.params.append(params)
        output = SimpleNamespace(token_ids=self.ids, text="", finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


CASES = [
    ("gsm8k", "She has 16 - 3 = 13 eggs. #### 13", "13", 1.0),
    ("gsm8k", "She has 12 eggs. #### 12", "13", 0.0),
    ("math", "So the answer is \\boxed{42}.", "42", 1.0),
]


@pytest.mark.parametrize("dataset,response,truth,expected", CASES)
@pytest.mark.parametrize("fixed_length", [False, True])
def test_openrlhfs_executor_scores_through_the_rlbench_hook(
    dataset, response, truth, expected, fixed_length, tiny_tokenizer, monkeypatch
):
    from rlbench.adapters.openrlhf.reward import label

    agent = _agent_module(monkeypatch)
    if fixed_length:  # loaded as OpenRLHF's vllm_engine._load_agent_executor loads --train.agent_func_path
        spec = importlib.util.spec_from_file_location("agent_module", openrlhf_config.REWARD_FILE)
        hook = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hook)
        assert issubclass(hook.AgentExecutor, agent.AgentExecutorBase)
        executor = hook.AgentExecutor()
    else:  # --reward.remote_url FILE.py
        executor = agent.SingleTurnAgentExecutor([str(openrlhf_config.REWARD_FILE)])
    engine = _Engine(tiny_tokenizer, response + (tiny_tokenizer.eos_token or ""))
    params = SimpleNamespace(max_tokens=32, logprobs=None, ignore_eos=False)
    output = asyncio.run(executor.execute("Q: how many?", label(dataset, truth), params, 64, tiny_tokenizer, engine))
    assert float(output["reward"]) == expected == score(dataset, response, truth)
    assert engine.params[0].ignore_eos is fixed_length and params.ignore_eos is False  # the caller's copy untouched


def test_reward_func_strips_the_prompt_and_special_tokens():
    prompt = "Give the answer after ####. Q: 2+2?"  # the instruction's own '####' must not be scored
    labels = [json.dumps({"dataset": "gsm8k", "ground_truth": "4"})] * 2
    result = reward_func(
        [prompt + " #### 4<|im_end|><|endoftext|>", prompt + " 5 apples #### 5</s>"], [prompt, prompt], labels
    )
    assert result["rewards"].tolist() == [1.0, 0.0] and result["scores"].tolist() == [1.0, 0.0]


# ---------------------------------------------------------------- metrics from OpenRLHF's TensorBoard logger


def _status(step: int) -> dict:
    """One step's status dict with the keys OpenRLHF 0.11.2 logs, where it sets them:
    trainer/ppo_trainer.py `train_step` (timing/make_experience, timing/ppo_train, timing/broadcast,
    lines 256-258) and `fit` (timing/generation, timing/step_total = sum of timing/*, lines 544-545);
    `_compute_rollout_stats` (rollout/*, lines 424-430); trainer/ray/ppo_actor.py `training_step`
    (policy_loss, actor_lr, actor_grad_norm, experience info such as ppo_kl, and the episode fields
    response_length and total_length, lines 368-400)."""
    timing = {
        "timing/make_experience": 0.5,
        "timing/ppo_train": 1.5 * step,
        "timing/broadcast": 0.25,
        "timing/generation": 2.0 * step,
    }
    return {
        **timing,
        "timing/step_total": sum(timing.values()),
        "rollout/reward_mean": 0.25 * step,
        "rollout/reward_std": 0.1,
        "rollout/response_length_mean": 12.5,
        "rollout/truncated_rate": 0.0,
        "rollout/num_samples": 8.0,
        "policy_loss": 0.1,
        "actor_lr": 1e-6,
        "actor_grad_norm": 0.3,
        "ppo_kl": 0.01,
        "kl": 0.002,
        "response_length": 12.5,
        "total_length": 12.5 + 30.0,
        "reward": 0.25 * step,
        "generated_samples": ["Q: ... #### 13", 1.0],
    }


def test_read_steps_maps_events_written_by_openrlhfs_tensorboard_logger(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from rlbench.harness.record.schema import STEP_METRICS
    from rlbench.harness.run.derive import derive_step_metrics

    root = _openrlhf_root()
    logging_utils = _load("openrlhf.utils.logging_utils", root / "utils" / "logging_utils.py", monkeypatch)
    args = get_adapter("openrlhf").flags(_spec(), MODEL, tmp_path)
    logger_args = SimpleNamespace(
        logger=SimpleNamespace(
            tensorboard_dir=args[args.index("--logger.tensorboard_dir") + 1],
            wandb=SimpleNamespace(run_name=args[args.index("--logger.wandb.run_name") + 1]),
        )
    )
    adapter = get_adapter("openrlhf")
    assert adapter.read_steps(tmp_path).empty  # nothing logged yet
    logger = logging_utils.TensorboardLogger(logger_args)
    for step in (1, 2):  # global_step after the increment in train_step: 1-based
        logger.log_train(step, _status(step))
    logger.log_eval(2, {"eval_gsm8k_pass1": 0.5})
    logger.writer.flush()
    assert adapter.metrics_file(tmp_path).name.startswith("events.out.tfevents.")
    assert adapter.metrics_file(tmp_path).stat().st_size > 0
    logger.close()

    steps = adapter.read_steps(tmp_path)
    assert set(steps.columns) <= set(STEP_METRICS) and list(steps["step"]) == [1, 2]
    assert list(steps["step_time_s"]) == [4.25, 7.75] and list(steps["time_gen_s"]) == [2.0, 4.0]
    assert list(steps["time_update_actor_s"]) == [1.5, 3.0] and list(steps["time_weight_sync_s"]) == [0.25] * 2
    first = steps.iloc[0]
    assert (first.num_responses, first.prompt_tokens, first.response_tokens) == (8, 240, 100)
    assert first.response_length_mean == 12.5 and list(steps["reward_mean"]) == [0.25, 0.5]
    assert all(math.isnan(first[c]) for c in ("framework_mfu", "peak_device_memory_gb", "time_ref_s"))
    assert first.time_old_log_prob_s == 0.5  # make_experience: mapped (it showed as "other"), named in equal_work
    assert first.step_end_unix_s > 1.7e9 and first.step_start_unix_s == first.step_end_unix_s - 4.25
    derived, note = derive_step_metrics(steps, gpu_count=8)  # no stamps applied: the framework's own timer
    assert derived["tokens_per_s"].tolist() == [340 / 4.25, 340 / 7.75] and "own step timer" in note
    assert derived["response_tokens_per_s"].tolist() == [100 / 2.0, 100 / 4.0]


def test_a_record_still_being_written_is_skipped(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    root = _openrlhf_root()
    logging_utils = _load("openrlhf.utils.logging_utils", root / "utils" / "logging_utils.py", monkeypatch)
    logger = logging_utils.TensorboardLogger(
        SimpleNamespace(
            logger=SimpleNamespace(
                tensorboard_dir=str(tmp_path / openrlhf_config.TENSORBOARD_DIR),
                wandb=SimpleNamespace(run_name=openrlhf_config.RUN_NAME),
            )
        )
    )
    logger.log_train(1, _status(1))
    logger.close()
    path = get_adapter("openrlhf").metrics_file(tmp_path)
    with path.open("ab") as events:
        events.write(b"\x20\x00\x00\x00\x00\x00\x00\x00partial")  # a length header and part of a record
    assert list(get_adapter("openrlhf").read_steps(tmp_path)["step"]) == [1]


# ---------------------------------------------------------------- refusals and the launch


def test_dry_run_plan_names_openrlhfs_trainer_and_key_flags():
    plan = get_adapter("openrlhf").plan(_spec(dp=4, rollout_tp=2), RunInputs(model=MODEL, prompts=[]), RUN_DIR)
    text = plan.describe()
    assert plan.argv[1:3] == ["-m", "rlbench.adapters.openrlhf.launcher"]
    assert plan.argv[plan.argv.index("--") + 1 :][1:3] == ["-m", "openrlhf.cli.train_ppo_ray"]
    for part in (
        "--actor.num_gpus_per_node 4",
        "--vllm.num_engines 2",
        "--vllm.tensor_parallel_size 2",
        "--train.colocate_all",
        "--algo.advantage.estimator group_norm",
        "--rollout.n_samples_per_prompt 8",
        "--rollout.batch_size 128",
        "--train.batch_size 256",
        "--ds.zero_stage 3",
        f"--actor.model_name_or_path {MODEL}",
        f"--train.agent_func_path {openrlhf_config.REWARD_FILE}",
        f"--logger.tensorboard_dir {RUN_DIR}/openrlhf_tensorboard",
        "WANDB_MODE=disabled",
    ):
        assert part in text, part
    assert "--train.async_enable" not in text and "--critic." not in text


@pytest.mark.parametrize(
    "workload,parallel,message",
    [
        ("gsm8k-grpo", {"pp": 2}, "pp=2: OpenRLHF trains with DeepSpeed ZeRO, which has no pipeline parallelism"),
        ("gsm8k-grpo", {"pp": 2, "pp_virtual": 2}, "pp=2: OpenRLHF trains with DeepSpeed ZeRO"),
        ("gsm8k-grpo", {"ep": 2, "dp": 2}, "ep=2: OpenRLHF 0.11.2 has no expert parallelism"),
        ("gsm8k-grpo", {"sp": 2}, "sp=2: OpenRLHF's sequence parallelism is ring attention .* use cp instead"),
        ("gsm8k-grpo", {"fuse": ("rollout_logprobs",)}, "fuse=rollout_logprobs: OpenRLHF 0.11.2's make_experience"),
        (
            "gsm8k-grpo",
            {"async_": "one-step"},
            "async=one-step: .* gives vLLM GPUs of its own .* placement=disaggregated",
        ),
        ("gsm8k-grpo", {"async_": "4"}, "async=4: .* gives vLLM GPUs of its own"),
        ("gsm8k-grpo", {"tp": 4}, "tp=4: .* does not divide its 14 attention heads, so Megatron cannot split"),
        ("gsm8k-grpo-tiny", {}, "model.dtype=float32: OpenRLHF 0.11 trains in bf16 or fp16 only"),
        ("gsm8k-grpo", {"rollout_tp": 2}, "rollout_tp=2: .* rollout_tp must divide 1; raise dp"),
        ("gsm8k-grpo", {"dp": 3}, "dp=3: must divide the 256 responses of one mini-batch"),
    ],
)
def test_unsupported_settings_are_refused_before_launch(workload, parallel, message):
    with pytest.raises(RLBenchError, match=message):
        get_adapter("openrlhf").check(_spec(workload, **parallel))


def test_shape_larger_than_the_machine_is_refused(monkeypatch):
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 8)
    message = "dp=4 rollout_tp=2 placement=disaggregated: OpenRLHF needs 16 GPUs for this shape, this machine has 8"
    with pytest.raises(RLBenchError, match=message):  # actor+ref 4, critic 4, vLLM 8
        get_adapter("openrlhf").check(_spec("gsm8k-ppo", dp=4, rollout_tp=2, **DISAGG))
    message = "dp=2 tp=2 placement=disaggregated: OpenRLHF needs 10 GPUs"
    with pytest.raises(RLBenchError, match=message):  # actor+ref dp*tp = 4, critic 4, vLLM 2
        get_adapter("openrlhf").check(_spec("gsm8k-ppo", dp=2, tp=2, **DISAGG))
    monkeypatch.setattr(module, "package_version", lambda name: None)
    with pytest.raises(RLBenchError, match="cp=2: OpenRLHF's ring attention needs ring-flash-attn"):
        get_adapter("openrlhf").check(_spec(cp=2))


def test_no_gpu_machine_is_not_usable_and_the_launch_refuses_it(tmp_path, capsys):
    usable, why = get_adapter("openrlhf").usable_here()
    assert not usable and ("no NVIDIA GPU" in why or "not installed" in why)
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    code = openrlhf_launch.main([str(tmp_path / "prompts.jsonl"), str(tmp_path / "o.jsonl"), "--", "/bin/false"])
    assert code == 2 and "OpenRLHF cannot run on this machine: no NVIDIA GPU" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_prelaunch_step_writes_the_jsonl_then_execs_openrlhf(tmp_path, monkeypatch):
    launched = []
    monkeypatch.setattr("rlbench.adapters.openrlhf.machine.machine_ready", lambda: (True, "test"))
    monkeypatch.setattr(prelaunch.os, "execv", lambda path, argv: launched.append(argv))
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    openrlhf_launch.main(
        [str(tmp_path / "prompts.jsonl"), str(tmp_path / "o.jsonl"), "--", "/usr/bin/python3", "-m", "x"]
    )
    assert launched == [["/usr/bin/python3", "-m", "x"]]
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["input"] for r in rows] == [r.prompt for r in _records()] and rows[0]["datasource"] == "gsm8k"


def test_registry_and_version():
    adapter = get_adapter("openrlhf")
    assert adapter.name == "openrlhf" and adapter.tested_versions == ">=0.11.2,<0.12"
    if importlib.util.find_spec("openrlhf") is not None:
        assert adapter.version_is_tested()


def test_cpu_lane_flags_parse_with_openrlhfs_own_cli_in_the_workloads_precision(monkeypatch):
    import argparse

    from rlbench.adapters.openrlhf import cpu_lane as openrlhf_shims

    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: True)
    monkeypatch.setattr(argparse.ArgumentParser, "add_argument", argparse.ArgumentParser.add_argument)  # restored
    openrlhf_shims._fp32_flag()  # the lane's shim: --ds.param_dtype accepts fp32
    adapter, spec = get_adapter("openrlhf"), _spec("gsm8k-grpo-tiny")
    adapter.check(spec)  # float32 is refused on GPUs, trained as it is on the lane
    seen = run_train_ppo_ray(adapter.flags(spec, MODEL, RUN_DIR), monkeypatch)
    args = seen.args
    assert args.ds.param_dtype == "fp32" and args.ds.attn_implementation == "sdpa"
    assert not args.train.colocate_all and args.train.colocate_actor_ref and not args.vllm.enable_sleep
    assert not args.train.dynamic_batch_enable and not args.ds.packing_samples
    assert args.train.micro_batch_size == args.train.batch_size == 16 and args.vllm.enforce_eager
    assert seen.engines.count == 1 and not seen.engines.sleep
    plan = adapter.plan(spec, RunInputs(model=MODEL, prompts=_records()), RUN_DIR)
    assert plan.env["RLBENCH_CPU_LANE"] == "openrlhf" and plan.env[openrlhf_shims.FP32_ENV] == "1"
    lane = adapter.lane(spec)
    assert lane["lane"] == "openrlhf-cpu" and "--train.colocate_all" in lane["substituted"]


def test_cpu_lane_refuses_what_it_was_not_made_to_run(monkeypatch):
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: True)
    with pytest.raises(RLBenchError, match="OpenRLHF's CPU lane runs tiny workloads only"):
        get_adapter("openrlhf").check(_spec("gsm8k-grpo"))
    with pytest.raises(RLBenchError, match="OpenRLHF's CPU lane runs one actor and one vLLM engine"):
        get_adapter("openrlhf").check(_spec("gsm8k-grpo-tiny", dp=2))


def test_the_readme_gpu_recipe_is_openrlhfs_own_pins():
    """Every `name==version` of the README's OpenRLHF recipe is what the installed OpenRLHF itself pins."""
    import importlib.metadata

    from packaging.requirements import Requirement

    from tests.conftest import readme_pins

    pins = {}
    for line in importlib.metadata.requires("openrlhf") or []:
        req = Requirement(line)
        exact = [spec.version for spec in req.specifier if spec.operator == "=="]
        if exact and (req.marker is None or req.marker.evaluate({"extra": "vllm"})):
            pins[req.name] = exact[0]
    named = readme_pins("### OpenRLHF on a GPU machine", "# openrlhf: usable")
    assert named.pop("openrlhf") == importlib.metadata.version("openrlhf")
    assert {"transformers", "deepspeed", "ray", "flash-attn", "vllm"} <= set(named)
    assert named == {name: pins[name] for name in named}


# ---------------------------------------------------------------- the arguments OpenRLHF itself resolved


def _prelaunch(spec: RunSpec, run_dir: Path, monkeypatch) -> list[list[str]]:
    """The generated launch's pre-launch step up to its exec (recorded, not run)."""
    launched: list[list[str]] = []
    monkeypatch.setattr("rlbench.adapters.openrlhf.machine.machine_ready", lambda: (True, "test"))
    monkeypatch.setattr(prelaunch.os, "execv", lambda path, argv: launched.append(argv))
    write_prompts(_records(), run_dir / "prompts.jsonl")
    plan = get_adapter("openrlhf").plan(spec, RunInputs(model=MODEL, prompts=_records()), run_dir)
    assert plan.argv[1:3] == ["-m", "rlbench.adapters.openrlhf.launcher"]
    openrlhf_launch.main(plan.argv[3:])
    return launched


@pytest.mark.parametrize("workload,parallel", [("gsm8k-grpo", {}), ("gsm8k-ppo", {"dp": 2, **DISAGG})])
def test_prelaunch_records_what_openrlhfs_own_parser_resolved(workload, parallel, tmp_path, monkeypatch):
    _openrlhf_root()
    spec = _spec(workload, **parallel)
    launched = _prelaunch(spec, tmp_path, monkeypatch)
    flags = get_adapter("openrlhf").flags(spec, MODEL, tmp_path)
    assert launched == [[sys.executable, "-m", openrlhf_config.TRAIN_MODULE, *flags]]  # the launch itself is unchanged
    saved = json.loads((tmp_path / openrlhf_config.RESOLVED_FILE).read_text())
    # Exactly the args OpenRLHF's train() receives when the installed file runs as __main__ with these flags.
    assert saved["args"] == openrlhf_launch._plain(run_train_ppo_ray(flags, monkeypatch).args)
    assert saved["flags"] == flags and saved["openrlhf"].startswith("0.11")
    # Values only OpenRLHF's parser and post-parse fixes set: rlbench passes neither flag.
    assert saved["args"]["rollout"]["vllm_generate_batch_size"] == spec.workload.prompts_per_step
    assert saved["args"]["ds"]["attn_implementation"] == "flash_attention_2"
    record = get_adapter("openrlhf").equal_work(spec, tmp_path)
    resolved = record["resolved"]
    assert resolved["source"] == str(tmp_path / openrlhf_config.RESOLVED_FILE)
    assert set(resolved["values"]) == set(record["applied"]) == set(record["contract"]) - set(record["differences"])
    assert resolved["values"]["engine.gpu_memory_utilization"] == saved["args"]["vllm"]["gpu_memory_utilization"]
    assert resolved["values"]["train.packing"] is True  # --ds.packing_samples, nested under args.ds
    assert not [why for why in record["differences"].values() if "no reason named" in why]
    if spec.workload.algorithm.name == "ppo":
        assert resolved["values"]["budget.critic"] == saved["args"]["train"]["max_tokens_per_gpu"]


def test_a_term_openrlhf_resolved_otherwise_is_a_named_difference(tmp_path, monkeypatch):
    """Launched with --vllm.enable_sleep but without --train.colocate_all, OpenRLHF's parser turns sleep off."""
    _openrlhf_root()
    spec = _spec()
    flags = [f for f in get_adapter("openrlhf").flags(spec, MODEL, tmp_path) if f != "--train.colocate_all"]
    openrlhf_launch.write_resolved(
        tmp_path / openrlhf_config.JSONL_FILE, [sys.executable, "-m", openrlhf_config.TRAIN_MODULE, *flags]
    )
    record = get_adapter("openrlhf").equal_work(spec, tmp_path)
    assert "engine.sleep_mode" not in record["applied"] and record["resolved"]["values"]["engine.sleep_mode"] is False
    assert record["differences"]["engine.sleep_mode"] == (
        "no reason named (the framework resolved vllm.enable_sleep=False; launched vllm.enable_sleep=True)"
    )
    assert record["resolved"]["values"]["engine.enable_prefix_caching"] is True


def test_a_flag_openrlhf_rejects_still_launches_without_a_resolved_file(tmp_path, monkeypatch, capsys):
    _openrlhf_root()
    launched = []
    monkeypatch.setattr("rlbench.adapters.openrlhf.machine.machine_ready", lambda: (True, "test"))
    monkeypatch.setattr(prelaunch.os, "execv", lambda path, argv: launched.append(argv))
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    command = [sys.executable, "-m", openrlhf_config.TRAIN_MODULE, "--vllm_num_engines", "1"]
    openrlhf_launch.main([str(tmp_path / "prompts.jsonl"), str(tmp_path / openrlhf_config.JSONL_FILE), "--", *command])
    assert launched == [command] and not (tmp_path / openrlhf_config.RESOLVED_FILE).exists()
    assert "OpenRLHF's arguments not recorded (SystemExit: 2)" in capsys.readouterr().out
    assert "resolved" not in get_adapter("openrlhf").equal_work(_spec(), tmp_path)


@pytest.mark.parametrize("text", ['{"args": {"vllm": ', "[1, 2]", '{"args": [1]}', '{"flags": []}'])
def test_a_damaged_resolved_file_is_no_crash_and_no_resolved(text, tmp_path):
    (tmp_path / openrlhf_config.RESOLVED_FILE).write_text(text)
    record = get_adapter("openrlhf").equal_work(_spec(), tmp_path)
    assert "resolved" not in record and record["applied"]


SPAN_SAMPLE = Path(__file__).resolve().parents[1] / "data" / "openrlhf_spans_sample.jsonl"


def test_read_spans_reads_a_recorded_span_log_and_skips_its_cut_short_line(tmp_path):
    """A real log's first two steps (tests/data/openrlhf_spans_sample.md), its last line cut mid-write."""
    (tmp_path / openrlhf_config.SPANS_LOG).write_bytes(SPAN_SAMPLE.read_bytes())
    spans = get_adapter("openrlhf").read_spans(tmp_path)
    assert list(spans.columns) == ["step", "stage", "start_unix_s", "end_unix_s"]
    assert spans["step"].tolist() == [1, 1, 1, 1, 2, 2, 2, 2]  # step 3's partial line is skipped
    assert spans["stage"].tolist() == ["gen", "old_log_prob", "update_actor", "weight_sync"] * 2
    assert (spans["end_unix_s"] >= spans["start_unix_s"]).all() and spans["start_unix_s"].is_monotonic_increasing


def test_read_spans_is_none_without_a_usable_log(tmp_path):
    adapter = get_adapter("openrlhf")
    assert adapter.read_spans(tmp_path) is None  # no log: OpenRLHF never reached a stage
    (tmp_path / openrlhf_config.SPANS_LOG).write_text(
        '{"step": 1, "stage": "gen", "start_unix_s": 2.0, "end_unix_s": 1.0}\n'  # ends before it starts
        '{"step": 0, "stage": "gen", "start_unix_s": 1.0, "end_unix_s": 2.0}\n'  # no step 0
        '{"step": 1, "stage": "lunch", "start_unix_s": 1.0, "end_unix_s": 2.0}\n'  # not an rlbench stage
        "[1, 2]\n"
        '{"step": 1, "stage": "ge'
    )
    assert adapter.read_spans(tmp_path) is None


def test_plan_installs_the_hooks_and_carries_the_profile_request():
    from rlbench.adapters.openrlhf import hooks
    from rlbench.harness.spec.profile import ProfileRequest

    spec = dataclasses.replace(_spec(), profile=ProfileRequest(tool="torch", first_step=2, last_step=3))
    env = get_adapter("openrlhf").plan(spec, RunInputs(model=MODEL, prompts=[]), RUN_DIR).env
    assert env["RLBENCH_HOOKS"] == hooks.__name__ and env["PYTHONPATH"].split(":")[0].endswith("cpu_lane/site")
    assert env[hooks.SPANS_ENV] == str(RUN_DIR / openrlhf_config.SPANS_LOG)
    assert json.loads(env[hooks.PROFILE_ENV]) == {"tool": "torch", "steps": [2, 3], "dir": str(RUN_DIR / "profile")}
    plain = get_adapter("openrlhf").plan(_spec(), RunInputs(model=MODEL, prompts=[]), RUN_DIR).env
    assert hooks.PROFILE_ENV not in plain and hooks.SPANS_ENV in plain  # spans always, the profiler on request


def test_profile_nsys_is_refused_in_one_line_before_launch(tmp_path):
    result = run_cli(
        "run", "--framework", "openrlhf", "--workload", "gsm8k-grpo-tiny", "--out", str(tmp_path), "--profile", "nsys"
    )
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "the OpenRLHF adapter maps --profile torch only" in result.stderr and "run with --profile torch" in (
        result.stderr
    )
    assert not any(tmp_path.iterdir())  # nothing launched, no record


def test_hooks_stamp_the_trainers_calls_even_where_ray_copied_its_methods(tmp_path, monkeypatch):
    """`ray.remote` copies BasePPOTrainer's methods onto the actor class before a patch to the base applies: the
    hooked __init__ binds the stamped ones on the instance, each call logged at the step train_step starts."""
    from rlbench.adapters.openrlhf import hooks
    from rlbench.adapters.openrlhf.metrics import read_span_log

    monkeypatch.setenv(hooks.SPANS_ENV, str(tmp_path / "spans.jsonl"))
    monkeypatch.setattr(hooks, "_STATE", {**hooks._STATE, "step": 0})

    class BasePPOTrainer:
        def __init__(self):
            self.calls = 0

        def train_step(self, rollout_samples, global_step):
            self.ppo_train(global_step)
            self.broadcast_to_vllm()
            return {}, global_step + 1

        def ppo_train(self, global_steps):
            self.calls += 1

        def broadcast_to_vllm(self):
            self.calls += 1

    base = types.ModuleType("openrlhf.trainer.ppo_trainer")
    base.BasePPOTrainer = BasePPOTrainer
    hooks._trainer(base)

    class PPOTrainer(BasePPOTrainer):  # as ray.remote leaves it: the inherited methods copied onto the class
        train_step, ppo_train = BasePPOTrainer.train_step, BasePPOTrainer.ppo_train
        broadcast_to_vllm = BasePPOTrainer.broadcast_to_vllm

    trainer = PPOTrainer()
    assert trainer.train_step(["rollout"], 0)[1] == 1 and trainer.train_step(["rollout"], 1)[1] == 2
    spans = read_span_log(tmp_path / "spans.jsonl")
    assert trainer.calls == 4 and spans["step"].tolist() == [1, 1, 2, 2]
    assert spans["stage"].tolist() == ["update_actor", "weight_sync"] * 2


def test_an_eval_target_runs_openrlhfs_own_evaluation_from_its_cli(monkeypatch, tmp_path):
    spec = _spec("gsm8k-format-grpo-tiny-eval")
    args = run_train_ppo_ray(get_adapter("openrlhf").flags(spec, MODEL, RUN_DIR), monkeypatch).args
    target = spec.workload.target
    assert args.eval.dataset == str(RUN_DIR / openrlhf_config.EVAL_JSONL_FILE)
    assert args.eval.dataset != args.data.prompt_dataset
    assert (args.eval.steps, args.eval.n_samples_per_prompt) == (target.eval_every, 1)
    assert args.eval.temperature == args.rollout.temperature == spec.workload.sampling.temperature
    assert "eval/eval_" in get_adapter("openrlhf").evaluation(spec)["hook"]
    plain = run_train_ppo_ray(
        get_adapter("openrlhf").flags(_spec("gsm8k-format-grpo-tiny"), MODEL, RUN_DIR), monkeypatch
    )
    assert plain.args.eval.dataset is None and plain.args.eval.steps == -1


def test_openrlhfs_eval_pass1_is_the_steps_eval_accuracy(tmp_path):
    from rlbench.adapters.openrlhf.metrics import eval_accuracy

    assert eval_accuracy({"train/timing/step_total": 1.0, "eval/eval_gsm8k-format_pass1": 0.75}) == 0.75
    assert math.isnan(eval_accuracy({"train/timing/step_total": 1.0}))
    write_prompts(_records(), tmp_path / "prompts.jsonl")
    write_prompts(_records()[:1], tmp_path / "eval_prompts.jsonl")
    openrlhf_launch.write_inputs(tmp_path / "prompts.jsonl", tmp_path / openrlhf_config.JSONL_FILE)
    held_out = (tmp_path / openrlhf_config.EVAL_JSONL_FILE).read_text().splitlines()
    assert [json.loads(line)["uid"] for line in held_out] == [_records()[0].uid]


def test_each_responses_length_reaches_the_steps_quantiles(tmp_path, monkeypatch):
    """hooks.log_lengths writes the lengths OpenRLHF's samples hold (Experience.response_length); read_steps
    turns a step's into its p50/p90/p99, and a damaged or foreign line counts for nothing."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from rlbench.adapters.openrlhf import hooks
    from rlbench.adapters.openrlhf.metrics import read_response_lengths

    log = tmp_path / openrlhf_config.SPANS_LOG
    monkeypatch.setenv(hooks.SPANS_ENV, str(log))
    samples = [SimpleNamespace(response_length=torch.tensor([n])) for n in range(1, 11)]
    hooks.log_lengths(2, [*samples, SimpleNamespace()])  # a sample without a length is left out
    with log.open("a") as handle:
        handle.write('{"step": 2, "lengths": [1, "x"]}\n{"step": "2", "lengths": [5]}\n{"step": 2, "lengths": [1')
    assert read_response_lengths(log) == {2: list(range(1, 11))}
    assert read_response_lengths(tmp_path / "none.jsonl") == {}
    from rlbench.adapters.common import length_quantiles

    assert length_quantiles(read_response_lengths(log)[2]) == {
        "response_length_p50": 5.0,
        "response_length_p90": 9.0,
        "response_length_p99": 10.0,
    }


ASYNC_SPANS = SPAN_SAMPLE.with_name("openrlhf_async_spans.jsonl")


def _resolved(tmp_path: Path, async_enable: bool) -> Path:
    path = tmp_path / "openrlhf_resolved.json"
    path.write_text(json.dumps({"args": {"train": {"async_enable": async_enable, "async_queue_size": 1}}}))
    return path


def test_an_async_runs_roles_and_staleness_come_from_the_stage_stamps(tmp_path):
    """OpenRLHF's async trainer, from rlbench's stamps in its processes (tests/data/openrlhf_spans_sample.md):
    batch 1 is trained on the policy that made it, every later batch was generated beside the previous step's
    training, one version behind; the rollout pool waits in the last step, with no next batch to make."""
    from rlbench.adapters.openrlhf.metrics import read_roles

    ledger = read_roles(ASYNC_SPANS, _resolved(tmp_path, True), responses_per_step=32, steps=3)
    steps = ledger["steps"]
    assert [s["staleness"]["max_versions_behind"] for s in steps] == [0, 1, 1]
    assert all(s["staleness"]["n"] == 32 for s in steps)
    assert steps[1]["roles"]["rollout"]["busy_s"] > 0.25 * steps[1]["window_s"]
    assert steps[2]["roles"]["rollout"]["idle_s"] > 0.8 * steps[2]["window_s"]
    assert read_roles(ASYNC_SPANS, _resolved(tmp_path, False), 32, 3) is None  # synchronous: the stage ledger
    assert read_roles(tmp_path / "missing.jsonl", _resolved(tmp_path, True), 32, 3) is None
