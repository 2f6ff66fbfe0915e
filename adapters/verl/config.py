"""The settings rlbench gives verl: the workload's algorithm, batches, engine and model as Hydra overrides, the
equal-work contract's keys in verl's config, what the CPU lane changes, and the profiler and Ray timeline
switches (`--profile`, stage spans).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path
from typing import Any

from rlbench.adapters import cpu_lane
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.equal_work import ADAM_BETAS, GRAD_CLIP, WEIGHT_DECAY, contract, nested_values
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.profile import PROFILE_DIR, ProfileRequest
from rlbench.harness.spec.runspec import RunSpec

ROLLOUT = "actor_rollout_ref.rollout"


# The equal-work contract's terms (rlbench.harness.spec.equal_work) -> the verl 0.9.1 config keys that carry them.
CONTRACT_KEYS = {
    **{
        f"engine.{name}": f"{ROLLOUT}.{name}"
        for name in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_prefix_caching",
            "gpu_memory_utilization",
            "enforce_eager",
        )
    },
    "engine.sleep_mode": f"{ROLLOUT}.free_cache_engine",  # sleep and wake vLLM around training (colocated)
    "budget.actor": "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "budget.log_prob": "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
    "budget.critic": "critic.ppo_max_token_len_per_gpu",
    "train.packing": "actor_rollout_ref.model.use_remove_padding",
    "train.gradient_checkpointing": "actor_rollout_ref.model.enable_gradient_checkpointing",
    "optim.adam_betas": "actor_rollout_ref.actor.optim.betas",  # set in algorithm_settings, the critic's alike
    "optim.weight_decay": "actor_rollout_ref.actor.optim.weight_decay",
    "optim.grad_clip": "actor_rollout_ref.actor.optim.clip_grad",
}


# verl's old-log-prob pass of the rollout runs on the same budget as the reference pass.
LOG_PROB_KEYS = ("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", f"{ROLLOUT}.log_prob_max_token_len_per_gpu")


# The CPU lane's launch settings: override -> (value, what it replaces on a GPU run). None of them changes
# the RL work (prompts, lengths, batch sizes, precision, passes); they change where and how it runs.
CPU_LANE: dict[str, tuple[Any, str]] = {
    "trainer.device": ("cpu", "cuda"),
    "actor_rollout_ref.actor.strategy": ("fsdp2", "fsdp (FSDP1 refuses CPU parameters)"),
    "actor_rollout_ref.ref.strategy": ("fsdp2", "fsdp"),
    "actor_rollout_ref.model.use_remove_padding": (False, "true: padding-free batches need flash-attention"),
    "+actor_rollout_ref.model.override_config.attn_implementation": ("sdpa", "flash_attention_2 (CUDA only)"),
    "+actor_rollout_ref.rollout.enable_sleep_mode": (False, "true: vLLM's sleep mode needs CUDA"),
    "actor_rollout_ref.rollout.enforce_eager": (True, "false: CUDA graphs"),
    "+ray_kwargs.ray_init.num_gpus": (1, "the node's real GPUs: one logical GPU places verl's workers"),
    "ray_kwargs.ray_init.num_cpus": (16, "the node's cores: logical CPUs so that every Ray actor is placed"),
    # Each of these is a Ray actor (a process importing verl); eight of each on a 2-core machine cost
    # minutes of start-up and contend with the step, not share its work.
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": (1, "8"),
    "reward.num_workers": (1, "8 reward-loop workers"),
    "actor_rollout_ref.rollout.agent.num_workers": (1, "8 agent-loop workers"),
}


# A rollout pool of its own (placement=disaggregated, the asynchronous trainers): its logical GPUs beside the
# trainer's, and weights sent by verl's checkpoint-engine protocol over the lane's gloo engine.
GLOO_ENGINE_MODULE = "rlbench.adapters.verl.checkpoint_engine"
CPU_LANE_ROLLOUT_POOL: dict[str, tuple[Any, str]] = {
    "actor_rollout_ref.rollout.checkpoint_engine.backend": (
        "gloo",
        "nccl: NCCL broadcast, trainer rank 0 to the rollout pool",
    ),
    "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module": (GLOO_ENGINE_MODULE, "none"),
}


# verl's fully-async trainer asks Ray for 10 CPUs for each of its trainer and rollouter controllers and 2 for its
# queue (fully_async_trainer.py, fully_async_rollouter.py, message_queue.py): logical CPUs enough to place them.
FULLY_ASYNC_CPUS = 40


def cpu_lane_settings(trainer: int, rollout: int, fully_async: bool = False) -> dict[str, tuple[Any, str]]:
    """The lane's substitutions for a run on `trainer` GPUs and a rollout pool of `rollout` (0: colocated)."""
    if not rollout:
        return dict(CPU_LANE)
    pool = {
        **CPU_LANE,
        "+ray_kwargs.ray_init.num_gpus": (trainer + rollout, "the node's real GPUs: one logical GPU per worker"),
        **CPU_LANE_ROLLOUT_POOL,
    }
    if fully_async:
        pool["ray_kwargs.ray_init.num_cpus"] = (FULLY_ASYNC_CPUS, CPU_LANE["ray_kwargs.ray_init.num_cpus"][1])
    return pool


CPU_LANE_ENV = {
    "VERL_PLATFORM": "cpu",  # the platform the lane's shims register
    "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engine for "cuda" only
    **cpu_lane.VLLM_CPU_ENV,
}


CPU_LANE_TOKENS = {
    "collectives": "gloo (GPU: NCCL)",
    "weight sync to vLLM": "shared memory (GPU: CUDA IPC)",
    "rollout engine": "vLLM CPU build, eager (GPU: vLLM with CUDA graphs)",
    **cpu_lane.VLLM_CPU_SETTINGS,
    # The lane's evidence that verl's rewards are rlbench's scores; verl times it on its own.
    "trainer.rollout_data_dir": "each step's responses and scores dumped to verl_rollouts/ "
    "(verl's own timer: dump_rollout_generations; GPU: off)",
}


# Renders a one-turn chat as its bare text: rlbench's non-chat prompts, through verl's always-chat path.
RAW_PROMPT_TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}"


_PLAIN = re.compile(r"[A-Za-z0-9_/.\-]+")  # characters Hydra reads as one unquoted string


def hydra_value(value: Any) -> str:
    """A Python value in Hydra's override grammar; strings are quoted unless plainly one unquoted string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if _PLAIN.fullmatch(text) and not _parses_as_non_string(text):
        return text  # paths, names, hub ids: readable in --dry-run
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parses_as_non_string(text: str) -> bool:
    if text.lower() in ("true", "false", "null", "nan", "inf"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def algorithm_settings(spec: RunSpec) -> dict[str, Any]:
    a = spec.workload.algorithm
    actor = "actor_rollout_ref.actor"
    grpo, kl = a.name == "grpo", a.kl_coef > 0
    return {
        "algorithm.adv_estimator": "grpo" if grpo else "gae",
        "critic.enable": not grpo,
        "actor_rollout_ref.rollout.n": a.group_size,
        f"{actor}.use_kl_loss": grpo and kl,
        f"{actor}.kl_loss_coef": a.kl_coef,
        f"{actor}.kl_loss_type": "low_var_kl",
        "algorithm.use_kl_in_reward": not grpo and kl,
        "algorithm.kl_ctrl.kl_coef": a.kl_coef,
        f"{actor}.clip_ratio": a.clip_ratio,
        f"{actor}.clip_ratio_low": a.clip_ratio,
        f"{actor}.clip_ratio_high": a.clip_ratio,
        f"{actor}.ppo_epochs": a.epochs,
        f"{actor}.optim.lr": a.learning_rate,
        f"{actor}.optim.betas": list(ADAM_BETAS),
        f"{actor}.optim.weight_decay": WEIGHT_DECAY,  # verl's own default is 0.01
        f"{actor}.optim.clip_grad": GRAD_CLIP,
    }


def batch_settings(spec: RunSpec) -> dict[str, Any]:
    w, budget = spec.workload, contract(spec.workload, spec.parallel).budget
    return {
        "data.train_batch_size": w.prompts_per_step,
        "actor_rollout_ref.actor.ppo_mini_batch_size": w.mini_batch_prompts,
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        CONTRACT_KEYS["budget.actor"]: budget.actor,
        **{key: budget.log_prob for key in LOG_PROB_KEYS},
        # verl's critic.forward_max_token_len_per_gpu follows it; unused without a critic (GRPO).
        CONTRACT_KEYS["budget.critic"]: budget.critic or budget.actor,
        "data.max_prompt_length": w.max_prompt_length,
        "data.max_response_length": w.max_response_length,
        "actor_rollout_ref.rollout.ignore_eos": w.fixed_length,
        "actor_rollout_ref.rollout.temperature": w.sampling.temperature,
        "actor_rollout_ref.rollout.top_p": w.sampling.top_p,
    }


def engine_settings(spec: RunSpec) -> dict[str, Any]:
    """The vLLM engine and the training terms of the equal-work contract, as verl keys (budgets: _batches)."""
    terms = contract(spec.workload, spec.parallel).to_dict()
    return {key: terms[term] for term, key in CONTRACT_KEYS.items() if not term.startswith(("budget.", "optim."))}


def model_settings(spec: RunSpec, model: str) -> dict[str, Any]:
    w = spec.workload
    settings: dict[str, Any] = {
        "actor_rollout_ref.model.path": model,  # gradient checkpointing and padding: _engine (the contract)
    }
    if w.algorithm.name == "ppo":
        settings.update(
            {"critic.model.path": model, "critic.model.enable_gradient_checkpointing": w.gradient_checkpointing}
        )
    if not w.prompt.chat:
        settings["actor_rollout_ref.model.custom_chat_template"] = RAW_PROMPT_TEMPLATE
    if w.model.dtype == "float32":
        fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
        settings["actor_rollout_ref.rollout.dtype"] = "float32"
        for engine in ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config", "critic.fsdp"):
            settings[f"++{engine}.mixed_precision"] = fp32  # not in verl's YAML: force-add
    return settings


def verl_root() -> Path:
    found = importlib.util.find_spec("verl")  # locates the package without importing it
    if found is None or not found.submodule_search_locations:
        raise RLBenchError("framework 'verl' is not installed; install it with pip install 'rlbench[verl]'")
    return Path(list(found.submodule_search_locations)[0])


def read_resolved(run_dir: Path) -> tuple[dict[str, Any], str] | None:
    """The contract's settings as verl composed them for the run (Hydra saves the composed config in
    <run>/verl_hydra/.hydra/config.yaml), with that path; None where verl did not get that far."""
    import yaml

    path = run_dir / HYDRA_DIR / ".hydra" / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    return nested_values(config, CONTRACT_KEYS.values()), str(path)


PARQUET_FILE = "verl_prompts.parquet"
VAL_PARQUET_FILE = "verl_eval_prompts.parquet"  # an eval_accuracy target's held-out problems (data.val_files)


def eval_settings(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    """verl's own validation (RayPPOTrainer._validate) for an eval_accuracy target: the held-out parquet every
    `eval_every` steps (trainer.test_freq; never before training), one response each, decoded with the
    workload's sampling (harness.spec.evaluation), scored by the same custom reward function as training."""
    target = spec.workload.target
    if target is None or not target.evaluates:
        return {}
    val = "actor_rollout_ref.rollout.val_kwargs"
    return {
        "data.val_files": str(run_dir / VAL_PARQUET_FILE),
        "trainer.test_freq": target.eval_every,
        f"{val}.n": 1,
        f"{val}.do_sample": True,
        f"{val}.temperature": spec.workload.sampling.temperature,
        f"{val}.top_p": spec.workload.sampling.top_p,
    }


ROLLOUT_DIR = "verl_rollouts"  # the CPU lane's dump of each step's responses and scores


HYDRA_DIR = "verl_hydra"  # verl's composed config lands in <run>/verl_hydra/.hydra/config.yaml


# --profile torch|nsys on verl 0.9.1's own profiler (verl/trainer/config/ppo_trainer.yaml, profiler/profiler.yaml):
# `global_profiler` (tool, steps, save_path) says which RL steps and where; each role's `profiler` (enable,
# all_ranks, tool_config) which workers take part. The trainer calls `start_profile(role="train")` on the
# actor/rollout/ref worker group at the top of a chosen step and `stop_profile` after its actor update, so the
# trace holds what the training worker runs (the log-prob forwards and the actor update, each marked by verl's
# `record_function`: actor_compute_log_prob, actor_update, their mini- and micro-batches); generation runs in
# vLLM's engine process, whose profiler rlbench leaves off. `stop_profile` writes the trace (gzipped Chrome
# JSON) inside the profiled step, so that step's time includes the export. torch.profiler needs nothing of the
# CPU lane's platform: verl's `profiler_start/stop` platform calls (the lane's no-ops) serve its nsys tool only.
ACTOR_PROFILER = "actor_rollout_ref.actor.profiler"
# Ray's timeline of every task and actor call, written by verl's main_ppo after training (ray.timeline()).
TIMELINE_FILE = "ray_timeline.json"


def nsys_refusal(on_lane: bool) -> str | None:
    """Why --profile nsys cannot run here, one line naming the fix; None where it can."""
    if on_lane:
        return (
            "--profile nsys: Nsight Systems traces CUDA, and verl's CPU lane has no GPU; "
            "use --profile torch on the lane (nsys needs a GPU machine with nsys on PATH)"
        )
    if shutil.which("nsys") is None:
        return (
            "--profile nsys: verl's nsys profiler launches its workers under `nsys`, which is not on PATH; "
            "install NVIDIA Nsight Systems (or add it to PATH), or use --profile torch"
        )
    return None


def profile_settings(request: ProfileRequest, run_dir: Path, on_lane: bool) -> dict[str, Any]:
    """verl config key -> value switching its profiler on for the request's steps, traces into <run>/profile.

    torch: CPU activities always (verl's stage markers are CPU events), CUDA kernels too off the lane; every
    actor rank writes its own gzipped Chrome trace. nsys: verl's worker and controller nsight options as shipped
    (capture bounded by verl's cudaProfilerApi start/stop around each chosen step), reports moved into save_path."""
    if request.tool == "nsys" and (why := nsys_refusal(on_lane)):
        raise RLBenchError(why)
    settings: dict[str, Any] = {
        "global_profiler.tool": request.tool,
        "global_profiler.steps": list(range(request.first_step, request.last_step + 1)),
        "global_profiler.save_path": str(run_dir / PROFILE_DIR),
        f"{ACTOR_PROFILER}.enable": True,
        f"{ACTOR_PROFILER}.all_ranks": True,
    }
    if request.tool == "torch":
        # An empty list means CPU and CUDA in verl's torch profiler; the lane names CPU alone (no CUDA runtime).
        settings[f"{ACTOR_PROFILER}.tool_config.torch.contents"] = ["cpu"] if on_lane else ["cpu", "cuda"]
    else:  # Ray writes nsys reports under its session's logs/nsight; verl moves them into save_path when asked
        settings["global_profiler.relocate_results"] = True
    return settings


# Ray's timeline holds an event per rollout server call, one per response (about 5.6 KB per response measured on
# the CPU lane): kept for runs of up to this many responses in all, or any run with --profile, so a long GPU run
# does not write (and hold in the driver) hundreds of MB. Without it verl's stages are placed end to end.
TIMELINE_MAX_RESPONSES = 20_000


def timeline_settings(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    """verl's switch for Ray's timeline (the source of `read_spans`), written into the record folder, where the
    run is small enough or profiled (TIMELINE_MAX_RESPONSES)."""
    responses = spec.workload.steps * spec.workload.responses_per_step
    if responses > TIMELINE_MAX_RESPONSES and spec.profile is None:
        return {}
    return {"ray_kwargs.timeline_json_file": str(run_dir / TIMELINE_FILE)}


MEGATRON_SIZES = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "pp_virtual": "virtual_pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
    "etp": "expert_tensor_parallel_size",  # unset: null, which Megatron-Core reads as tp
}


def layout_settings(p: Parallelism, trainer: int, rollout: int) -> dict[str, Any]:
    """Where verl places the run: nodes and GPUs of the trainer (and of a rollout pool of its own), the Megatron
    backend's sizes or FSDP's Ulysses sp, the rollout engine's tp; `trainer`, `rollout`: the GPUs of each."""
    settings: dict[str, Any] = {
        "trainer.nnodes": p.nodes,
        "trainer.n_gpus_per_node": p.gpus_on_each_node(trainer),
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": p.rollout_tp,
    }
    if p.megatron_knobs:  # verl derives Megatron's dp from the GPUs: trainer / (tp*pp*cp)
        for knob, size in MEGATRON_SIZES.items():
            value = getattr(p, knob) if knob != "pp_virtual" or p.pp_virtual > 1 else None
            settings[f"actor_rollout_ref.actor.megatron.{size}"] = value  # the ref's follows (oc.select)
            settings[f"critic.megatron.{size}"] = value
    else:
        settings.update(
            {
                "actor_rollout_ref.actor.ulysses_sequence_parallel_size": p.sp,
                "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size": p.sp,
                "actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size": p.sp,
                "critic.ulysses_sequence_parallel_size": p.sp,
                "critic.fsdp.ulysses_sequence_parallel_size": p.sp,
            }
        )
    if "rollout_logprobs" in p.fuse:  # vLLM's sampling log-probs stand in for the old-log-prob pass
        settings.update({"algorithm.rollout_correction.bypass_mode": True, f"{ROLLOUT}.calculate_log_probs": True})
    if rollout:
        # The one-step config names verl's base config by a cwd-relative search path; make it absolute.
        settings.update(
            {
                "hydra.searchpath": [f"file://{verl_root() / 'trainer' / 'config'}"],
                "actor_rollout_ref.hybrid_engine": False,
                "rollout.nnodes": p.nodes,
                "rollout.n_gpus_per_node": p.gpus_on_each_node(rollout),
            }
        )
    else:
        settings.update({"actor_rollout_ref.hybrid_engine": True, "trainer.v1.trainer_mode": "sync"})
    return settings


def fully_async_settings(spec: RunSpec) -> dict[str, Any]:
    """verl's fully-async trainer on rlbench's step: a trainer step takes one step's prompts and syncs weights
    after it; the rollouter generates at most one step's worth ahead and stops after the run's prompts."""
    w, p = spec.workload, spec.parallel
    if p.async_ != "fully":
        return {}
    return {
        "data.train_batch_size": 0,  # the trainer's step is require_batches mini-batches; the rollouter's one prompt
        "async_training.require_batches": w.prompts_per_step // w.mini_batch_prompts,
        "async_training.trigger_parameter_sync_step": 1,
        "async_training.staleness_threshold": 1.0,
        "async_training.partial_rollout": p.partial_rollout == "on",
        # verl logs a trainer step's metrics after the next step's weight sync, so the last step asked is logged
        # only if one more runs: the rollouter gets one step more of prompts (the data's second pass: its first
        # prompts again); that step is trained, never logged, and not recorded.
        "rollout.total_rollout_steps": (w.steps + 1) * w.prompts_per_step,  # prompts, despite the name
        "trainer.total_epochs": 2,
        "rollout.n": w.algorithm.group_size,
    }
