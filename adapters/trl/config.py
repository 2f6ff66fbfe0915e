"""The GRPOConfig rlbench gives TRL: the equal-work contract's keys in TRL's fields, the vLLM engine settings it
fixes, and the configuration TRL resolved, read back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LAUNCH_FILE = "trl_launch.json"


# What TRL resolved, written by the launcher once GRPOTrainer is built: {"trl", "args", "generation"}.
RESOLVED_FILE = "trl_resolved.json"


# The equal-work contract's terms (harness.spec.equal_work) -> the GRPOConfig fields that carry them (vLLM only).
CONTRACT_KEYS = {
    "engine.gpu_memory_utilization": "vllm_gpu_memory_utilization",
    "engine.sleep_mode": "vllm_enable_sleep_mode",
    "train.gradient_checkpointing": "gradient_checkpointing",
}


# The optimiser's terms -> the GRPOConfig fields that carry them; the betas are two fields there, so the record
# reads them as one pair under ADAM_BETAS_KEY (no GRPOConfig field: never passed to TRL).
ADAM_BETAS_KEY = "adam_beta1, adam_beta2"
OPTIM_KEYS = {
    "optim.adam_betas": ADAM_BETAS_KEY,
    "optim.weight_decay": "weight_decay",
    "optim.grad_clip": "max_grad_norm",
}


def with_betas(args: dict[str, Any]) -> dict[str, Any]:
    """TRL's settings with the betas also as the pair the contract states."""
    return {**args, ADAM_BETAS_KEY: [args.get("adam_beta1"), args.get("adam_beta2")]}


# GRPOConfig field -> the attribute of the vLLM engine settings TRL built from it (RESOLVED_FILE's generation.vllm):
# where TRL ran vLLM, the value it really passed to the engine is the one read back.
VLLM_ENGINE_KEYS = {
    "vllm_gpu_memory_utilization": "gpu_memory_utilization",
    "vllm_enable_sleep_mode": "enable_sleep_mode",
}


# What TRL 1.16's colocated vLLM (trl/generation/vllm_generation.py, grpo_trainer.py) does not let a user set.
VLLM_FIXED = {
    "engine.max_num_seqs": "TRL 1.16 sets it to per_device_train_batch_size x vllm_tensor_parallel_size x "
    "steps_per_generation ({seqs} here)",
    "engine.max_num_batched_tokens": "TRL 1.16 fixes it at 4096",
    "engine.enable_prefix_caching": "TRL 1.16 passes none: vLLM's own default applies",
    "engine.enforce_eager": "TRL 1.16 passes none: vLLM's own default (CUDA graphs) applies",
}


def read_resolved(run_dir: Path) -> tuple[tuple[dict[str, Any], str] | None, str | None]:
    """((GRPOConfig field -> value as TRL resolved it, where read), None), from the launcher's RESOLVED_FILE; or
    (None, why not) where TRL did not get as far as building its trainer, or the file is damaged."""
    path = run_dir / RESOLVED_FILE
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        return None, f"{path.name} not written (TRL did not build its trainer): the launch settings stand unverified"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path.name} unreadable ({type(exc).__name__}: {exc}): the launch settings stand unverified"
    args = saved.get("args") if isinstance(saved, dict) else None
    if not isinstance(args, dict):
        return None, f"{path.name} holds no TRL args: the launch settings stand unverified"
    args = with_betas(args)
    values = {key: args.get(key) for key in [*CONTRACT_KEYS.values(), *OPTIM_KEYS.values()]}
    generation = saved.get("generation")
    engine = generation.get("vllm") if isinstance(generation, dict) else None
    if isinstance(engine, dict):
        values.update({key: engine[name] for key, name in VLLM_ENGINE_KEYS.items() if name in engine})
    return (values, str(path)), None
