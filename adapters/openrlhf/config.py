"""The flags rlbench gives OpenRLHF: the workload's algorithm, batches, engine and model, the equal-work contract's
flags, and what the CPU lane changes; the arguments OpenRLHF resolved, read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlbench.harness.spec.equal_work import ADAM_BETAS, GRAD_CLIP, WEIGHT_DECAY, contract, nested_values
from rlbench.harness.spec.runspec import RunSpec

JSONL_FILE = "openrlhf_prompts.jsonl"
TENSORBOARD_DIR = "openrlhf_tensorboard"
RUN_NAME = "rlbench"  # --logger.wandb.run_name: also the TensorBoard subfolder
# OpenRLHF persists none of its parsed arguments (TensorBoard gets scalars and sample text only, wandb's config
# only with a wandb key): the pre-launch step records them here, as OpenRLHF's own parser resolved them.
RESOLVED_FILE = "openrlhf_resolved.json"
CRITIC_LR = 1e-5  # verl's critic default, so both frameworks train the same critic
REWARD_FILE = Path(__file__).resolve().with_name("reward.py")
TRAIN_MODULE = "openrlhf.cli.train_ppo_ray"
SYNC_LOG = "openrlhf_weight_sync.jsonl"  # the CPU lane's checksums of the actor's and vLLM's weights per sync
REWARD_LOG = "openrlhf_rewards.jsonl"  # the CPU lane's log of every scored response
SPANS_LOG = "openrlhf_spans.jsonl"  # hooks.py: each timed stage call's real start and end, GPU and CPU lane


# The equal-work contract's terms (rlbench.harness.spec.equal_work) -> the OpenRLHF 0.11 flags that carry them.
CONTRACT_KEYS = {
    **{
        f"engine.{name}": f"vllm.{name}"
        for name in ("enable_prefix_caching", "gpu_memory_utilization", "enforce_eager")
    },
    "engine.sleep_mode": "vllm.enable_sleep",  # sleep and wake vLLM around training (colocated)
    "budget.actor": "train.max_tokens_per_gpu",
    "budget.critic": "train.max_tokens_per_gpu",  # one flag for both
    "budget.log_prob": "rollout.max_tokens_per_gpu",  # make_experience: old log-probs, ref, values
    "train.packing": "ds.packing_samples",
    "train.gradient_checkpointing": "actor.gradient_checkpointing_enable",  # the critic reads the same flag
    "optim.adam_betas": "actor.adam.betas",  # set in algorithm_flags, the critic's alike
    "optim.weight_decay": "actor.adam.weight_decay",
    "optim.grad_clip": "actor.max_norm",
}


# The CPU lane's flag changes: flag -> (value or None to drop it, what it replaces on a GPU run).
CPU_LANE_FLAGS: dict[str, tuple[Any, str]] = {
    "train.colocate_all": (False, "colocated actor, ref and vLLM: vLLM's sleep mode needs CUDA"),
    "vllm.enable_sleep": (False, "on"),
    "ds.enable_sleep": (False, "on"),
    "vllm.gpu_memory_utilization": (None, "0.5 of GPU memory (the lane's KV cache is set in GiB)"),
    "train.colocate_actor_ref": (True, "everything colocated: actor and ref share one process, vLLM has its own"),
    "train.dynamic_batch_enable": (False, "on: token-budget micro-batches"),
    "ds.packing_samples": (False, "on: packing needs flash-attention"),
    "ds.attn_implementation": ("sdpa", "flash_attention_2 (CUDA only)"),
    "vllm.enforce_eager": (True, "off: CUDA graphs"),
    "vllm.sync_backend": ("gloo", "nccl"),
}


# DeepSpeed refuses AutoTP with ZeRO-3 (runtime/engine.py: autotp and zero_stage 3 not validated together).
TP_ZERO_STAGE = 2


CPU_LANE_TOKENS = {
    "collectives": "gloo (GPU: NCCL)",
    "training": "DeepSpeed ZeRO-3 on its CPU accelerator",
    "rollout engine": "vLLM CPU build, eager (GPU: vLLM with CUDA graphs)",
    "Ray resources": "2 logical GPUs (actor+ref, vLLM) and 4 logical CPUs, for placement only",
    "weight sync": "each sync's actor and vLLM weight checksums logged inside timing/broadcast "
    f"to {SYNC_LOG} (GPU: off)",
    "rewards": f"every scored response also logged to {REWARD_LOG} by rlbench's hook (GPU: off)",
}


def algorithm_flags(spec: RunSpec) -> dict[str, Any]:
    a = spec.workload.algorithm
    grpo, kl = a.name == "grpo", a.kl_coef > 0
    settings: dict[str, Any] = {
        "algo.advantage.estimator": "group_norm" if grpo else "gae",
        "rollout.n_samples_per_prompt": a.group_size,
        "algo.kl.init_coef": a.kl_coef,
        "algo.kl.use_loss": grpo and kl,
        "algo.kl.estimator": "k3" if grpo and kl else "k1",  # k3 = verl's low_var_kl; k1 in the PPO reward
        "actor.eps_clip": a.clip_ratio,
        "train.max_epochs": a.epochs,
        "actor.adam.lr": a.learning_rate,
        "actor.adam.betas": list(ADAM_BETAS),  # OpenRLHF's own default is (0.9, 0.95)
        "actor.adam.weight_decay": WEIGHT_DECAY,
        "actor.max_norm": GRAD_CLIP,
        "actor.lr_scheduler": "constant",
        "actor.lr_warmup_ratio": 0,
    }
    if not grpo:
        settings.update(
            {
                "critic.adam.lr": CRITIC_LR,
                "critic.adam.betas": list(ADAM_BETAS),
                "critic.adam.weight_decay": WEIGHT_DECAY,
                "critic.max_norm": GRAD_CLIP,
                "critic.lr_scheduler": "constant",
                "critic.lr_warmup_ratio": 0,
            }
        )
    return settings


def engine_flags(spec: RunSpec) -> dict[str, Any]:
    """The vLLM engine and the training terms of the equal-work contract, as OpenRLHF flags (store_true flags:
    True or left off; budgets: _batches)."""
    terms = contract(spec.workload, spec.parallel).to_dict()
    return {flag: terms[term] for term, flag in CONTRACT_KEYS.items() if not term.startswith(("budget.", "optim."))}


def batch_flags(spec: RunSpec) -> dict[str, Any]:
    w, budget = spec.workload, contract(spec.workload, spec.parallel).budget
    return {
        "rollout.batch_size": w.prompts_per_step,
        "train.batch_size": w.mini_batch_prompts * w.algorithm.group_size,
        "train.micro_batch_size": 1,
        "rollout.micro_batch_size": 1,
        "train.dynamic_batch_enable": True,  # ds.packing_samples: _engine (the contract)
        "train.max_tokens_per_gpu": budget.actor,
        "rollout.max_tokens_per_gpu": budget.log_prob,
        "data.max_len": w.max_prompt_length + w.max_response_length,
        "rollout.max_new_tokens": w.max_response_length,
        "rollout.temperature": w.sampling.temperature,
        "rollout.top_p": w.sampling.top_p,
    }


def model_flags(spec: RunSpec, model: str) -> dict[str, Any]:
    w = spec.workload
    return {
        "actor.model_name_or_path": model,
        "critic.model_name_or_path": model if w.algorithm.name == "ppo" else None,
        "ds.param_dtype": "bf16",
        "data.apply_chat_template": w.prompt.chat,
    }


def run_flags(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    w = spec.workload
    hook = "train.agent_func_path" if w.fixed_length else "reward.remote_url"
    return {
        "data.prompt_dataset": str(run_dir / JSONL_FILE),
        "data.input_key": "input",
        "data.label_key": "label",
        hook: str(REWARD_FILE),
        "train.num_episodes": 1,
        "train.seed": spec.seed,
        "logger.tensorboard_dir": str(run_dir / TENSORBOARD_DIR),
        "logger.wandb.run_name": RUN_NAME,
        "logger.logging_steps": 1,
        "eval.steps": -1,
        "ckpt.save_steps": -1,
        # OpenRLHF always saves the final model; keep it inside the run folder.
        "ckpt.path": str(run_dir / "openrlhf_ckpt"),
        "ckpt.output_dir": str(run_dir / "openrlhf_model"),
        **eval_flags(spec, run_dir),
    }


EVAL_JSONL_FILE = "openrlhf_eval_prompts.jsonl"  # an eval_accuracy target's held-out problems (--eval.dataset)


def eval_flags(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    """OpenRLHF's own evaluation (PPOTrainer.evaluate, every --eval.steps steps after the step's log; never before
    training) for an eval_accuracy target: the held-out JSONL, one sample each at the workload's temperature (the
    rollout's top_p and max_new_tokens carry over: OpenRLHF copies its generate kwargs), scored by the same reward
    hook as training (harness.spec.evaluation)."""
    target = spec.workload.target
    if target is None or not target.evaluates:
        return {}
    return {
        "eval.dataset": str(run_dir / EVAL_JSONL_FILE),
        "eval.steps": target.eval_every,
        "eval.temperature": spec.workload.sampling.temperature,
        "eval.n_samples_per_prompt": 1,
    }


def cpu_lane_flags(spec: RunSpec) -> dict[str, tuple[Any, str]]:
    """The lane's flag changes for this run: CPU_LANE_FLAGS, one micro-batch per mini-batch on each data-parallel
    rank (what the GPU run's 16k-token dynamic batches hold for a tiny workload; OpenRLHF's micro-batch sizes
    are per GPU), and the workload's own precision."""
    w = spec.workload
    responses = w.mini_batch_prompts * w.algorithm.group_size // spec.parallel.dp
    return {
        **CPU_LANE_FLAGS,
        "train.micro_batch_size": (responses, "1 with token-budget dynamic batches"),
        "rollout.micro_batch_size": (responses, "1 with token-budget dynamic batches"),
        "ds.param_dtype": ("fp32" if w.model.dtype == "float32" else "bf16", "bf16 only"),
    }


def read_resolved(run_dir: Path) -> tuple[dict[str, Any], str] | None:
    """The contract's settings (CONTRACT_KEYS' flags, read as OpenRLHF's nested attributes) as OpenRLHF's parser
    resolved them for the run, with the file's path; None where the file is missing or damaged."""
    path = run_dir / RESOLVED_FILE
    try:
        args = json.loads(path.read_text())["args"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(args, dict):
        return None
    # argparse's dest keeps the flag's dots; OpenRLHF's hierarchize nests on them
    return nested_values(args, CONTRACT_KEYS.values()), str(path)
