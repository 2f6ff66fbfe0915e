"""verl adapter: runs verl's own trainer, `python -m verl.trainer.main_ppo`, with Hydra overrides.

    rlbench run --framework verl --workload gsm8k-grpo --parallel dp=8 --parallel rollout_tp=2 --dry-run

Trainer tp, pp, cp or ep select verl's Megatron backend (its `ppo_megatron_trainer` config); without
them verl trains with FSDP (and Ulysses sp).

On NVIDIA GPUs, or without one through the CPU lane (cpu_lane.py beside this file). The folder's other
modules: config.py (the Hydra settings), metrics.py (verl's log into rlbench's steps), machine.py (what
verl needs here), launcher.py (the pre-launch step that writes verl's parquet and `exec`s verl),
reward.py (verl's reward hook). The knob mapping, what is refused and how metrics are read:
docs/adapters/verl.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from rlbench.adapters import cpu_lane
from rlbench.adapters.base import LaneAdapter, LaunchPlan
from rlbench.adapters.verl import launcher, machine
from rlbench.adapters.verl.config import (
    CONTRACT_KEYS,
    CPU_LANE_ENV,
    CPU_LANE_TOKENS,
    HYDRA_DIR,
    PARQUET_FILE,
    ROLLOUT_DIR,
    VAL_PARQUET_FILE,
    algorithm_settings,
    batch_settings,
    cpu_lane_settings,
    engine_settings,
    eval_settings,
    fully_async_settings,
    hydra_value,
    layout_settings,
    model_settings,
    profile_settings,
    read_resolved,
    timeline_settings,
)
from rlbench.adapters.verl.metrics import normalize, read_roles, read_spans
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.equal_work import contract, manifest
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import (
    MEGATRON_KNOBS,
    NODE_KNOBS,
    check_expert_ranks,
    check_model_split,
    check_nodes,
    knob_label,
)
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry import accelerators

REWARD_FILE = Path(__file__).resolve().with_name("reward.py")
# verl's trainer by --parallel async: its entry module, and its Hydra config for FSDP and for Megatron.
MODULES = {
    "off": "verl.trainer.main_ppo",
    "one-step": "verl.experimental.one_step_off_policy.main_ppo",
    "fully": "verl.experimental.fully_async_policy.fully_async_main",
}
CONFIG_NAMES = {
    ("off", False): "ppo_trainer",
    ("off", True): "ppo_megatron_trainer",
    ("one-step", False): "one_step_off_ppo_trainer",
    ("one-step", True): "one_step_off_ppo_megatron_trainer",
    ("fully", False): "fully_async_ppo_trainer",
    ("fully", True): "fully_async_ppo_megatron_trainer",
}
ASYNC_TRAINERS = {"one-step": "one-step-off-policy", "fully": "fully-async"}
# --parallel knob -> Megatron's parallel size in verl's megatron config (actor; ref follows it, critic set too).
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
    "(staleness_threshold), not in whole steps: use async=fully (that trainer, samples at most one step's worth "
    "ahead) or async=one-step"
)
PARTIAL_ROLLOUT_REFUSAL = (
    "verl 0.9.1's partial rollout is part of its fully-async trainer (async_training.partial_rollout); "
    "use --parallel async=fully with it, or drop partial_rollout (async=one-step waits for each batch's longest "
    "sample)"
)
FULLY_ASYNC_STALENESS = (
    "verl's fully-async trainer: a rollouter generating one prompt at a time into a queue, the trainer taking one "
    "step's prompts (require_batches mini-batches) and syncing weights after every step "
    "(trigger_parameter_sync_step=1); staleness_threshold=1: at most one step's worth of samples generated "
    "ahead of the trainer's weights, the bound of one-step-off. It logs a step after the next one's weight sync, "
    "so it runs one step more than asked (on the data's first prompts again), trained but not recorded"
)
NO_ROLLOUT_DUMP = (
    "not set: verl 0.9.1's trainers with a rollout pool of their own never start the dump's executor "
    "(AttributeError: _dump_executor); the lane's rollout dump is for colocated runs only"
)
STEP_TIME = (
    "timing_s/step: verl's wall-clock timer around a step's stages (ray_trainer.py "
    "marked_timer('step')), the metric computation after it left out"
)
# Where verl's reference model lives: verl/workers/engine/fsdp/transformer_impl.py (0.9.1) gives every forward-only
# FSDP model CPUOffload(offload_params=True) (fsdp) or CPUOffloadPolicy(pin_memory=True) (fsdp2), no setting to undo it.
# The lane's Ray resources, which a driver joining a running cluster must not declare (Ray refuses them).
JOINING_DROPS = ("+ray_kwargs.ray_init.num_gpus", "ray_kwargs.ray_init.num_cpus")
REF_OFFLOAD = (
    "verl's FSDP engine keeps the reference model's parameters in host memory and copies them to the device for every "
    "micro-batch (CPUOffload on every forward-only model: 'We force reference policy to use CPUOffload to save "
    "memory'); OpenRLHF and TRL keep the reference model on the device"
)


class VerlAdapter(LaneAdapter):
    name = "verl"
    distribution = "verl"
    tested_versions = ">=0.9.1,<0.10"
    supported_knobs = frozenset(
        {
            "dp",
            "tp",
            "rollout_tp",
            "pp",
            "pp_virtual",
            "cp",
            "ep",
            "etp",
            "sp",
            "placement",
            "fuse",
            "async",
            "partial_rollout",
        }
        | set(NODE_KNOBS)
    )
    knob_notes = MappingProxyType(
        {
            **dict.fromkeys(MEGATRON_KNOBS + ("pp_virtual", "etp"), "Megatron backend"),
            "sp": "FSDP only",
            "fuse": "`rollout_logprobs`",
            "async": "off, one-step, fully",
            **dict.fromkeys(NODE_KNOBS, "`trainer.nnodes`, `rollout.nnodes`"),
            "partial_rollout": "with async=fully",
        }
    )
    brings_own_ray = True
    cluster_placement = (
        "verl's ResourcePoolManager: one placement group of n_gpus_per_node GPU bundles per node "
        "(trainer.nnodes nodes; rollout.nnodes for a separate rollout pool), each node's bundles packed on one node"
    )
    label = "verl"
    lane_runs = "one colocated synchronous process (dp=rollout_tp=sp=1), or the disaggregated asynchronous trainers"
    lane_strategies = MappingProxyType(
        {
            "placement": frozenset({"disaggregated"}),
            "async": frozenset(ASYNC_TRAINERS),
            "partial_rollout": frozenset({"on"}),
        }
    )

    def usable_here(self) -> tuple[bool, str]:
        if self.version() is None:
            return False, "not installed (pip install 'rlbench[verl]')"
        return machine.machine_ready()

    def machine_ready(self) -> tuple[bool, str]:
        return machine.machine_ready()

    def refuse_knobs(self, spec: RunSpec) -> None:
        """What verl 0.9.1 cannot honour, whatever the machine: one line naming the knob and the reason."""
        p, w = spec.parallel, spec.workload
        if p.partial_rollout == "on" and p.async_ != "fully":
            raise RLBenchError(f"--parallel partial_rollout=on: {PARTIAL_ROLLOUT_REFUSAL}")
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
        if p.placement == "colocated" and p.async_ in ASYNC_TRAINERS:
            raise RLBenchError(
                f"--parallel async={p.async_}: verl 0.9.1's {ASYNC_TRAINERS[p.async_]} trainer needs its own "
                "rollout GPUs (its colocated mode pauses generation while training); "
                "add --parallel placement=disaggregated"
            )
        if p.placement == "disaggregated" and p.async_ == "off":
            raise RLBenchError(
                "--parallel placement=disaggregated: verl 0.9.1 separates rollout GPUs only in its "
                "asynchronous trainers; add --parallel async=one-step or async=fully, or use placement=colocated"
            )
        if p.async_ in ASYNC_TRAINERS and w.algorithm.name != "grpo":
            raise RLBenchError(
                f"--parallel async={p.async_}: verl's {ASYNC_TRAINERS[p.async_]} trainer supports GRPO-family "
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
        return CONFIG_NAMES[(spec.parallel.async_, bool(spec.parallel.megatron_knobs))]

    def lane(self, spec: RunSpec) -> dict[str, Any] | None:
        if not self.on_lane():
            return None
        lane = cpu_lane_settings(*self.gpu_layout(spec), spec.parallel.async_ == "fully")
        settings = {key: f"{hydra_value(value)} (GPU: {gpu})" for key, (value, gpu) in lane.items()}
        tokens = dict(CPU_LANE_TOKENS)
        if self.gpu_layout(spec)[1]:
            tokens["trainer.rollout_data_dir"] = NO_ROLLOUT_DUMP
        return cpu_lane.describe(self.name, {**tokens, **settings})

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
        check_nodes(p, {"trainer": trainer, "rollout pool": rollout})
        if not rollout and trainer % p.rollout_tp:
            raise RLBenchError(
                f"--parallel rollout_tp={p.rollout_tp}: verl's colocated rollout engines are rollout_tp "
                f"GPUs wide on the trainer's {trainer} GPUs (dp*tp*pp*cp*sp), so rollout_tp must "
                f"divide {trainer}; raise dp"
            )
        available = accelerators.gpu_count()
        # Without GPUs only --dry-run gets past the launch; a multi-node layout is checked against the cluster's nodes.
        if available and p.nodes == 1 and trainer + rollout > available:
            raise RLBenchError(
                f"--parallel {knob_label(spec.parallel.non_default())}: verl needs {trainer + rollout} GPUs "
                "for this shape, "
                f"this machine has {available}"
            )
        if available and p.async_ in ASYNC_TRAINERS and not self.on_lane():
            problem = machine.gpu_stack_problem(one_step=True)
            if problem:
                raise RLBenchError(problem)

    def overrides(self, spec: RunSpec, model: str, run_dir: Path) -> list[str]:
        """verl's Hydra overrides for this run, in order (composed against verl's config in the tests)."""
        return [f"{key}={hydra_value(value)}" for key, value in self.settings(spec, model, run_dir).items()]

    def settings(self, spec: RunSpec, model: str, run_dir: Path) -> dict[str, Any]:
        """verl config key -> value for this run, the CPU lane's changes applied last."""
        settings = {
            **layout_settings(spec.parallel, *self.gpu_layout(spec)),
            **algorithm_settings(spec),
            **batch_settings(spec),
            **engine_settings(spec),
            **model_settings(spec, model),
            **self._run(spec, run_dir),
            **fully_async_settings(spec),  # after _run: its step count and epochs are the fully-async trainer's
            **timeline_settings(spec, run_dir),
            **(self.profile_launch(spec, run_dir) or {}),
        }
        if self.on_lane():
            lane = cpu_lane_settings(*self.gpu_layout(spec), spec.parallel.async_ == "fully")
            settings.update({key: value for key, (value, _) in lane.items()})
            if not self.gpu_layout(spec)[1]:  # see NO_ROLLOUT_DUMP
                settings["trainer.rollout_data_dir"] = str(run_dir / ROLLOUT_DIR)
            if spec.ray_address:  # a running cluster has its resources; Ray refuses them from a joining driver
                for key in JOINING_DROPS:
                    settings.pop(key)
        return settings

    def profile_launch(self, spec: RunSpec, run_dir: Path) -> dict[str, Any] | None:
        """--profile: verl's own profiler (config.py's profile_settings), its traces in the record's profile/."""
        if spec.profile is None:
            return None
        return profile_settings(spec.profile, run_dir, self.on_lane())

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
        elif spec.parallel.async_ in ASYNC_TRAINERS:
            named["passes.old_log_prob"] = (
                f"verl's {ASYNC_TRAINERS[spec.parallel.async_]} trainer takes vLLM's sampling log-probs as the old "
                "log-probs (algorithm.rollout_correction.bypass_mode=true in its config): no old-log-prob forward "
                "pass, which OpenRLHF's async trainer runs"
            )
        if spec.parallel.async_ == "fully":
            named["async.staleness"] = FULLY_ASYNC_STALENESS
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
            **eval_settings(spec, run_dir),  # an eval_accuracy target: verl's own validation
        }

    def evaluation(self, spec: RunSpec) -> dict[str, Any] | None:
        settings = eval_settings(spec, Path("<run>"))
        if not settings:
            return None
        differences = {
            "timing": "verl validates after its step timer and before it logs the step: timing_s/step leaves the "
            "evaluation out, the evaluating step's wall step time (and a target reached there) holds it; TRL and "
            "OpenRLHF evaluate after the step's log, in the next step's wall time"
        }
        if spec.workload.steps % spec.workload.target.eval_every:
            differences["last_step"] = (
                "verl also validates at the last step (is_last_step), which is not a multiple of eval_every here"
            )
        return {
            "hook": "verl RayPPOTrainer._validate (data.val_files, trainer.test_freq, rollout.val_kwargs); its "
            "logged val-aux/<data_source>/reward/mean@1 (the reward's mean; val-core's acc where verl adds one)",
            "settings": settings,
            "differences": differences,
        }

    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan:
        module = MODULES[spec.parallel.async_]
        # Megatron: its own config; FSDP keeps the entry point's default (the CPU lane's launch unchanged).
        config = [f"--config-name={self.config_name(spec)}"] if spec.parallel.megatron_knobs else []
        verl = [sys.executable, "-m", module, *config, *self.overrides(spec, inputs.model, run_dir)]
        argv = [
            sys.executable,
            "-m",
            launcher.__name__,
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

    def job_gpus(self, spec: RunSpec) -> int:
        return sum(self.gpu_layout(spec))

    def node_inputs(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> list[Path]:
        """The prompts as verl's parquet (its TaskRunner, a Ray actor on any node, reads them) and the reward
        hook verl loads by path, beside the base's."""
        launcher.write_inputs(run_dir / "prompts.jsonl", run_dir / PARQUET_FILE)
        held_out = [run_dir / VAL_PARQUET_FILE] if inputs.eval_prompts else []
        return [*super().node_inputs(spec, inputs, run_dir), run_dir / PARQUET_FILE, *held_out, REWARD_FILE]

    def ray_env(self, run_dir: Path) -> dict[str, str]:
        """What verl's Ray actors must see: the file logger's destination (absolute), no wandb."""
        return {"VERL_FILE_LOGGER_PATH": str(self.metrics_file(run_dir).absolute()), "WANDB_MODE": "disabled"}

    def model_shape(self, spec: RunSpec) -> dict[str, Any]:
        """Dynamic batch size: micro-batches packed to ppo_max_token_len_per_gpu tokens; fp32 when asked; the
        reference model's parameters in host memory (verl's FSDP engine forces CPUOffload(offload_params=True)
        on every forward-only model: "We force reference policy to use CPUOffload to save memory")."""
        return {
            "micro_batch_tokens": batch_settings(spec)["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"],
            "dtype_bytes": 4 if spec.workload.model.dtype == "float32" else 2,
            "ref_offload": not spec.parallel.megatron_knobs,
        }

    def lane_shape(self, spec: RunSpec) -> dict[str, Any]:
        """The lane trains without use_remove_padding (CPU_LANE): verl's dataset left-pads every prompt to
        data.max_prompt_length and the training passes compute the padded rows; vLLM pages without the pads, in
        its CPU build's block size, eager."""
        return {"trainer_padded_prompt_len": spec.workload.max_prompt_length, **cpu_lane.VLLM_CPU_SHAPE}

    def read_spans(self, run_dir: Path) -> pd.DataFrame | None:
        """Stage calls from Ray's timeline (metrics.py), which verl writes after training; its
        rollouts are numbered back from the last step verl logged."""
        steps = self.read_steps(run_dir)
        if steps.empty:
            return read_spans(run_dir)
        evaluated = frozenset(int(s) for s in steps.loc[steps["eval_accuracy"].notna(), "step"])
        return read_spans(run_dir, int(steps["step"].max()), evaluated)

    def read_roles(self, run_dir: Path, responses_per_step: int, steps: int) -> dict[str, Any] | None:
        return read_roles(run_dir, responses_per_step, steps)

    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        path = self.metrics_file(run_dir)
        rows = []
        for line in path.read_text().splitlines() if path.exists() else []:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line verl is writing right now
            if isinstance(record, dict) and "timing_s/step" in record.get("data", {}):  # not validation lines
                data = record["data"]
                # The fully-async trainer logs step k's metrics at logger step k+1; its own count is in the line.
                step = data.get("training/global_step", record["step"])
                rows.append(normalize(int(step), data))
        return pd.DataFrame(rows)


if __name__ == "__main__":  # the pre-launch module of records written before launcher.py: runs the same step
    sys.exit(launcher.main())
