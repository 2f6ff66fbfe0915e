"""OpenRLHF adapter: runs OpenRLHF's own trainer, `python -m openrlhf.cli.train_ppo_ray`, with its 0.11 flags.

    rlbench run --framework openrlhf --workload gsm8k-grpo --parallel dp=8 --parallel rollout_tp=2 --dry-run

On NVIDIA GPUs, or without one through the CPU lane (cpu_lane.py beside this file). The folder's other
modules: config.py (the flags), metrics.py (OpenRLHF's TensorBoard scalars into rlbench's steps),
machine.py (what OpenRLHF needs here), launcher.py (the pre-launch step that writes OpenRLHF's JSONL,
records its resolved arguments and `exec`s it), reward.py (OpenRLHF's reward function). The flag
mapping, what is refused and how metrics are read: docs/adapters/openrlhf.md.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from rlbench.adapters import cpu_lane
from rlbench.adapters.base import LaneAdapter, LaunchPlan
from rlbench.adapters.common import length_quantiles
from rlbench.adapters.openrlhf import hooks, launcher, machine
from rlbench.adapters.openrlhf.config import (
    CONTRACT_KEYS,
    CPU_LANE_TOKENS,
    EVAL_JSONL_FILE,
    JSONL_FILE,
    RESOLVED_FILE,
    REWARD_FILE,
    REWARD_LOG,
    RUN_NAME,
    SPANS_LOG,
    SYNC_LOG,
    TENSORBOARD_DIR,
    TP_ZERO_STAGE,
    TRAIN_MODULE,
    algorithm_flags,
    batch_flags,
    cpu_lane_flags,
    engine_flags,
    eval_flags,
    model_flags,
    read_resolved,
    run_flags,
)
from rlbench.adapters.openrlhf.metrics import (
    eval_accuracy,
    normalize,
    read_forward_widths,
    read_response_lengths,
    read_roles,
    read_scalars,
    read_span_log,
)
from rlbench.adapters.openrlhf.reward import REWARD_LOG_ENV
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.harness.spec.equal_work import contract, manifest
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import NODE_KNOBS, check_nodes, knob_label
from rlbench.harness.spec.profile import PROFILE_DIR
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry import accelerators

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
MAKE_EXPERIENCE = (
    "timing/make_experience as time_old_log_prob_s: OpenRLHF times the actor's old-log-prob pass, the reference's "
    "and critic's passes (when the run has them, concurrently) and the advantages as one stage; verl and TRL time "
    "the old-log-prob pass alone"
)
# --ds.enable_sleep (colocated): openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, around each fit.
SLEEP_OFFLOAD = (
    "--ds.enable_sleep (colocated): DeepSpeed moves the actor's and critic's fp32 master weights, gradients and "
    "optimizer states to pinned host memory after each update and back before the next (offload_deepspeed_states); "
    "verl and TRL keep them on the device"
)
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
    "partial_rollout": "OpenRLHF 0.11.2's --train.partial_rollout_enable only lets a weight sync pause in-flight "
    "generation; each batch still waits for its longest sample, which partial_rollout=on says it does not; drop "
    "partial_rollout (async=one-step or K still overlaps generation with training)",
}


class OpenRLHFAdapter(LaneAdapter):
    name = "openrlhf"
    distribution = "openrlhf"
    tested_versions = ">=0.11.2,<0.12"
    supported_knobs = frozenset({"dp", "tp", "rollout_tp", "cp", "placement", "async", *NODE_KNOBS})
    knob_notes = MappingProxyType(
        {
            "tp": "DeepSpeed AutoTP",
            "cp": "`--ds.ring_attn_size`",
            "sp": "refused (use cp)",
            "async": "off, one-step, K",
            **dict.fromkeys(NODE_KNOBS, "`--*.num_nodes`"),
            "partial_rollout": "refused (its flag only pauses for weight sync)",
        }
    )
    brings_own_ray = True
    cluster_placement = (
        "OpenRLHF's placement groups, strategy PACK (train_ppo_ray.py, launcher.py, vllm_engine.py): each model's "
        "GPU bundles fill one node before the next, the actor/ref group and the vLLM engines' group each their own"
    )
    label = "OpenRLHF"
    lane_runs = "one actor and one vLLM engine, synchronously or with OpenRLHF's async trainer"
    # The lane already gives vLLM a process and a logical GPU of its own (CPU_LANE_FLAGS: colocate_all off), so
    # disaggregated placement and the async trainer (--train.async_enable, K batches ahead) run as on a GPU.
    lane_strategies = MappingProxyType(
        {"placement": frozenset({"disaggregated"}), "async": frozenset({"one-step", *map(str, range(2, 9))})}
    )

    def usable_here(self) -> tuple[bool, str]:
        if self.version() is None:
            return False, "not installed (pip install 'rlbench[openrlhf]'; GPU install steps in the README)"
        return machine.machine_ready()

    def machine_ready(self) -> tuple[bool, str]:
        return machine.machine_ready()

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
        if p.async_ == "fully":
            raise RLBenchError(
                "--parallel async=fully: OpenRLHF 0.11.2 has no streaming rollouter; its async trainer runs "
                "whole steps ahead (--async_train, async_queue_size): use async=one-step or async=K"
            )
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
        check_nodes(p, {"actor": trainer, "critic": critic, "vLLM pool": rollout})
        if not rollout and trainer % p.rollout_tp:
            raise RLBenchError(
                f"--parallel rollout_tp={p.rollout_tp}: colocated vLLM engines are rollout_tp GPUs wide "
                f"on the trainer's dp*tp*cp = {trainer} GPUs, so rollout_tp must divide {trainer}; "
                "raise dp"
            )
        available = accelerators.gpu_count()
        if available and p.cp > 1 and package_version("ring-flash-attn") is None:
            raise RLBenchError(
                f"--parallel cp={p.cp}: OpenRLHF's ring attention needs ring-flash-attn; "
                "pip install 'openrlhf[ring]', or use cp=1"
            )
        # Without GPUs only --dry-run gets past launch; a multi-node layout is checked against the cluster's nodes.
        if available and p.nodes == 1 and trainer + critic + rollout > available:
            raise RLBenchError(
                f"--parallel {knob_label(spec.parallel.non_default())}: OpenRLHF needs "
                f"{trainer + critic + rollout} GPUs for "
                f"this shape, this machine has {available}"
            )

    def profile_launch(self, spec: RunSpec, run_dir: Path) -> dict[str, Any] | None:
        """--profile torch: torch.profiler around the chosen RL steps in the controller and each actor training
        rank (hooks.py; OpenRLHF 0.11.2 has no profiler switch of its own); Chrome traces land in profile/."""
        if spec.profile is None:
            return None
        if spec.profile.tool != "torch":
            raise RLBenchError(
                f"--profile {spec.profile.tool}: the OpenRLHF adapter maps --profile torch only (nsys would have to "
                "wrap each Ray worker OpenRLHF starts); run with --profile torch"
            )
        return {**spec.profile.to_dict(), "dir": str(run_dir / PROFILE_DIR)}

    def flags(self, spec: RunSpec, model: str, run_dir: Path) -> list[str]:
        """`train_ppo_ray`'s command-line flags for this run (parsed by OpenRLHF's own parser in the tests)."""
        argv: list[str] = []
        for flag, value in self.settings(spec, model, run_dir).items():
            if value is False or value is None:
                continue  # store_true flags left off
            argv.append(f"--{flag}")
            if isinstance(value, (list, tuple)):  # nargs flags, e.g. --actor.adam.betas 0.9 0.999
                argv.extend(str(v) for v in value)
            elif value is not True:
                argv.append(str(value))
        return argv

    def settings(self, spec: RunSpec, model: str, run_dir: Path) -> dict[str, Any]:
        """flag (without --) -> value for this run, the CPU lane's changes applied last; False/None: left off."""
        settings = {
            **self._layout(spec),
            **algorithm_flags(spec),
            **batch_flags(spec),
            **engine_flags(spec),
            **model_flags(spec, model),
            **run_flags(spec, run_dir),
        }
        if self.on_lane():
            settings.update({flag: value for flag, (value, _) in cpu_lane_flags(spec).items()})
        return settings

    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any]:
        named = {**NOT_SETTABLE, "step_time": STEP_TIME, "stage.old_log_prob": MAKE_EXPERIENCE}
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
        on_each = p.gpus_on_each_node(trainer)
        settings: dict[str, Any] = {
            "actor.num_nodes": p.nodes,
            "actor.num_gpus_per_node": on_each,
            "ref.num_nodes": p.nodes,
            "ref.num_gpus_per_node": on_each,
        }
        if spec.workload.algorithm.name == "ppo":
            settings.update({"critic.num_nodes": p.nodes, "critic.num_gpus_per_node": on_each})
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
            launcher.__name__,
            str(run_dir / "prompts.jsonl"),
            str(run_dir / JSONL_FILE),
            "--",
            *openrlhf,
        ]
        env = {
            "WANDB_MODE": "disabled",
            "TOKENIZERS_PARALLELISM": "false",
            **cpu_lane.hooks_env(hooks.__name__),  # the stage stamps and the profiler, in every OpenRLHF process
            hooks.SPANS_ENV: str(run_dir / SPANS_LOG),
        }
        profile = self.profile_launch(spec, run_dir)
        if profile is not None:
            env[hooks.PROFILE_ENV] = json.dumps(profile)
        if spec.workload.model.tiny is not None:
            env["HF_HUB_OFFLINE"] = "1"
        if self.on_lane():
            from rlbench.adapters.openrlhf import cpu_lane as lane_shims

            env.update(
                {
                    "DS_ACCELERATOR": "cpu",
                    "RLBENCH_LANE_RAY_GPUS": "2",
                    "RLBENCH_LANE_RAY_CPUS": "4",
                    lane_shims.SYNC_LOG_ENV: str(run_dir / SYNC_LOG),
                    REWARD_LOG_ENV: str(run_dir / REWARD_LOG),
                    lane_shims.FP32_ENV: "1" if spec.workload.model.dtype == "float32" else "0",
                    **cpu_lane.VLLM_CPU_ENV,
                    **cpu_lane.lane_env(self.name),
                }
            )
        return LaunchPlan(argv=argv, env=env)

    def job_gpus(self, spec: RunSpec) -> int:
        if self.on_lane():  # the lane gives vLLM GPUs of its own (CPU_LANE_FLAGS): one engine per actor rank
            return 2 * spec.parallel.world_size
        return sum(self.gpu_layout(spec))

    def node_inputs(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> list[Path]:
        """The prompts as OpenRLHF's JSONL and the reward hook it loads by path, beside the base's."""
        launcher.write_inputs(run_dir / "prompts.jsonl", run_dir / JSONL_FILE)
        held_out = [run_dir / EVAL_JSONL_FILE] if inputs.eval_prompts else []
        return [*super().node_inputs(spec, inputs, run_dir), run_dir / JSONL_FILE, *held_out, REWARD_FILE]

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
            "micro_batch_tokens": batch_flags(spec)["train.max_tokens_per_gpu"],
            "update_offload": bool(self._layout(spec)["ds.enable_sleep"]),
        }

    def lane_shape(self, spec: RunSpec) -> dict[str, Any]:
        """The CPU lane launches without --ds.enable_sleep (CPU_LANE_FLAGS): nothing is swapped; vLLM's CPU build
        pages in its own block size, eager."""
        return {"update_offload": False, **cpu_lane.VLLM_CPU_SHAPE}

    def read_spans(self, run_dir: Path) -> pd.DataFrame | None:
        """Each timed stage call's real start and end, as hooks.py stamped them in OpenRLHF's processes."""
        return read_span_log(run_dir / SPANS_LOG)

    def read_roles(self, run_dir: Path, responses_per_step: int, steps: int) -> dict[str, Any] | None:
        return read_roles(run_dir / SPANS_LOG, run_dir / RESOLVED_FILE, responses_per_step, steps)

    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        steps = read_scalars(run_dir / TENSORBOARD_DIR / RUN_NAME)
        widths = read_forward_widths(run_dir / SPANS_LOG)  # the policy's padded width, where it pads
        lengths = read_response_lengths(run_dir / SPANS_LOG)  # each response's, as OpenRLHF's samples hold them
        rows = [
            {
                **normalize(step, values, end),
                "eval_accuracy": eval_accuracy(values),
                "trainer_padded_width": widths.get(step, math.nan),
                **length_quantiles(lengths.get(step, [])),
                # OpenRLHF logs no longest response; its samples say what it was
                **({"response_length_max": float(max(lengths[step]))} if lengths.get(step) else {}),
            }
            for step, (values, end) in sorted(steps.items())
            if "train/timing/step_total" in values
        ]  # eval points ride on their step's row
        return pd.DataFrame(rows)

    def evaluation(self, spec: RunSpec) -> dict[str, Any] | None:
        flags = eval_flags(spec, Path("<run>"))
        if not flags:
            return None
        return {
            "hook": "OpenRLHF PPOTrainer.evaluate (--eval.dataset, --eval.steps, --eval.temperature, "
            "--eval.n_samples_per_prompt); its logged eval/eval_<datasource>_pass1",
            "settings": flags,
            "differences": {
                "timing": "OpenRLHF evaluates after the step's log: the evaluation's time falls between steps"
            },
        }


if __name__ == "__main__":  # the pre-launch module of records written before launcher.py: runs the same step
    sys.exit(launcher.main())
