"""TRL adapter: runs TRL's own `GRPOTrainer` in a separate process (`rlbench.adapters.trl.launcher`).

The one framework that runs GRPO on a CPU, so it is the embedded default
(`rlbench run --framework trl --workload gsm8k-grpo-tiny`). On GPUs it generates
with vLLM in colocate mode when vLLM is installed, else with transformers. The knob
mapping and what is refused: docs/adapters/trl.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from rlbench.adapters.base import Adapter, LaunchPlan
from rlbench.adapters.trl.config import (
    CONTRACT_KEYS,
    LAUNCH_FILE,
    OPTIM_KEYS,
    RESOLVED_FILE,
    VLLM_FIXED,
    read_resolved,
    with_betas,
)
from rlbench.adapters.trl.machine import vllm_problem
from rlbench.adapters.trl.metrics import normalize, with_evaluations
from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.schema import SPAN_COLUMNS
from rlbench.harness.spec.environment import gpus, package_version
from rlbench.harness.spec.equal_work import ADAM_BETAS, GRAD_CLIP, WEIGHT_DECAY, contract, manifest
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.profile import PROFILE_DIR
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.prompts import EVAL_PROMPTS_FILE

NO_PACKING = "TRL 1.16's GRPOTrainer pads each micro-batch to its longest sequence (no packing)"
NO_ENGINE = (
    "no vLLM here: TRL generates with transformers' generate (no rollout engine: no paged KV cache, "
    "no prefix sharing between a prompt's responses)"
)
COUNT_BATCHES = (
    "TRL micro-batches by count, not tokens: per_device_train_batch_size={n} responses per device, padded, not packed"
)


# What TRL 1.16's GRPOTrainer (as rlbench launches it) cannot honour, by knob: the reason, one line.
REFUSED_KNOBS = {
    "tp": "TRL 1.16's GRPOConfig has no trainer tensor parallelism (its only TP is vLLM's: rollout_tp)",
    "pp": "TRL 1.16 trains through accelerate (DDP/FSDP/DeepSpeed ZeRO), which has no pipeline parallelism",
    "pp_virtual": "TRL 1.16 trains through accelerate, which has no pipeline parallelism",
    "cp": "TRL 1.16's GRPOTrainer refuses context parallelism (parallelism_config cp_size > 1)",
    "sp": "TRL 1.16's GRPOTrainer refuses sequence parallelism (parallelism_config sp_size > 1)",
    "ep": "TRL 1.16 has no expert parallelism",
    "etp": "TRL 1.16 has no expert parallelism, so no expert tensor parallelism",
    "fuse": "TRL 1.16 decides itself whether the old-log-prob pass runs (skipped when a generation feeds one "
    "update and vLLM's importance-sampling correction is off); rlbench has no switch for it",
    "nodes": "rlbench launches TRL with `accelerate launch` on this host only; a multi-node TRL run needs "
    "`accelerate launch --machine_rank` on every machine (or Ray Train around it), which rlbench does not start; "
    "use nodes=1",
    "gpus_per_node": "it describes a multi-node layout, and rlbench runs TRL on one host (nodes=1); drop it",
    "async": "TRL 1.16's asynchronous GRPO is experimental (trl.experimental.async_grpo) and not launched by "
    "rlbench; use async=off",
}
STEP_TIME = (
    "rlbench's callback in TRL's Trainer: wall clock from on_step_begin of a step's first update to "
    "on_log of its last (launcher.py)"
)


class TRLAdapter(Adapter):
    name = "trl"
    distribution = "trl"
    tested_versions = ">=1.16,<1.17"
    supported_knobs = frozenset({"dp", "rollout_tp", "placement"})
    knob_notes = MappingProxyType({"rollout_tp": "yes (GPU, vLLM)", "placement": "colocated", "async": "off"})
    runs_on_cpu = True

    def usable_here(self) -> tuple[bool, str]:
        if self.version() is None:
            return False, "not installed (pip install 'rlbench[trl]')"
        if not gpus()[0]:
            return True, "CPU (tiny workloads)"
        problem = vllm_problem()
        if problem:
            return False, problem
        vllm = package_version("vllm")
        return True, f"GPU, vLLM {vllm} rollout" if vllm else "GPU, transformers generate (no vLLM installed)"

    def _on_gpu(self) -> bool:
        return self.plans_gpu or bool(gpus()[0])

    def _use_vllm(self) -> bool:
        if gpus()[0]:
            return package_version("vllm") is not None
        # planning a GPU machine's launch from one without a GPU: rlbench's TRL GPU environment installs vLLM
        # (benchmarks/gpu-envs/trl.txt), whatever this machine has
        return self.plans_gpu

    def refuse_knobs(self, spec: RunSpec) -> None:
        """What TRL 1.16 cannot honour, whatever the machine: one line naming the knob and the reason."""
        for knob, value in spec.parallel.non_default().items():
            if knob in REFUSED_KNOBS:
                raise RLBenchError(f"--parallel {knob}={value}: {REFUSED_KNOBS[knob]}")
        if spec.parallel.placement == "disaggregated":
            raise RLBenchError(
                "--parallel placement=disaggregated: the TRL adapter runs vLLM colocated only "
                "(TRL's vLLM server mode is not launched by rlbench yet); use placement=colocated"
            )

    def check(self, spec: RunSpec) -> None:
        self.refuse_knobs(spec)
        super().check(spec)
        workload, parallel = spec.workload, spec.parallel
        if workload.algorithm.name != "grpo":
            raise RLBenchError(
                f"workload {workload.name}: TRL {self.version()} has no PPO trainer; "
                "run PPO workloads with --framework verl or --framework openrlhf"
            )
        gpu_count = len(gpus()[0])
        if parallel.dp > 1 and parallel.dp > gpu_count:
            raise RLBenchError(f"--parallel dp={parallel.dp}: needs {parallel.dp} GPUs, this machine has {gpu_count}")
        if parallel.rollout_tp > 1 and not self._use_vllm():
            raise RLBenchError(
                f"--parallel rollout_tp={parallel.rollout_tp}: TRL's rollout tensor parallelism is "
                "vLLM's; it needs NVIDIA GPUs and vLLM installed (pip install vllm)"
            )
        if parallel.dp % parallel.rollout_tp:
            raise RLBenchError(
                f"--parallel rollout_tp={parallel.rollout_tp}: TRL's colocated vLLM groups the "
                f"dp={parallel.dp} training processes, so rollout_tp must divide dp"
            )

    def grpo_config(self, spec: RunSpec, run_dir: Path) -> dict[str, Any]:
        """Keyword arguments of `trl.GRPOConfig` for this run (validated by TRL's own dataclass in tests)."""
        w, p = spec.workload, spec.parallel
        use_vllm, on_gpu = self._use_vllm(), self._on_gpu()
        length = w.max_response_length
        if not w.fixed_length:
            generation_kwargs = None
        elif use_vllm:
            generation_kwargs = {"min_tokens": length, "ignore_eos": True}
        else:
            generation_kwargs = {"min_new_tokens": length}
        config: dict[str, Any] = {
            "output_dir": str(run_dir / "trl_output"),
            "seed": spec.seed,
            "max_steps": w.steps * w.updates_per_step,
            "learning_rate": w.algorithm.learning_rate,
            "adam_beta1": ADAM_BETAS[0],
            "adam_beta2": ADAM_BETAS[1],
            "weight_decay": WEIGHT_DECAY,
            "max_grad_norm": GRAD_CLIP,
            "lr_scheduler_type": "constant",
            "num_generations": w.algorithm.group_size,
            "per_device_train_batch_size": w.mini_batch_prompts * w.algorithm.group_size // p.dp,
            "gradient_accumulation_steps": 1,
            "steps_per_generation": w.prompts_per_step // w.mini_batch_prompts,
            "num_iterations": w.algorithm.epochs,
            "beta": w.algorithm.kl_coef,
            "epsilon": w.algorithm.clip_ratio,
            "max_completion_length": length,
            "temperature": w.sampling.temperature,
            "top_p": w.sampling.top_p,
            "generation_kwargs": generation_kwargs,
            # transformers >= 5.2x calls this activation_checkpointing and warns on the old name; the
            # old name is the one every transformers that TRL 1.16 and verl 0.9 install accepts.
            "gradient_checkpointing": w.gradient_checkpointing,
            # rlbench fixes the prompt order (prompts.jsonl) so every framework sees the same prompts.
            "shuffle_dataset": False,
            "logging_steps": w.updates_per_step,
            "report_to": "none",
            "save_strategy": "no",
            "disable_tqdm": True,
            "use_cpu": not on_gpu,
            "bf16": on_gpu and w.model.dtype == "bfloat16",
            "model_init_kwargs": {"dtype": w.model.dtype if on_gpu else "float32"},
            "use_vllm": use_vllm,
        }
        config.update(self._eval_config(spec, config["per_device_train_batch_size"]))
        if use_vllm:
            terms = contract(w, p).to_dict()
            config.update(
                vllm_mode="colocate",
                vllm_tensor_parallel_size=p.rollout_tp,
                **{key: terms[term] for term, key in CONTRACT_KEYS.items()},
            )
        return config

    @staticmethod
    def _eval_config(spec: RunSpec, batch: int) -> dict[str, Any]:
        """TRL's own evaluation (Trainer's eval loop, GRPOTrainer's eval generation and reward) every eval_every
        RL steps: TRL counts optimiser updates, updates_per_step of them to an RL step. One generation per
        problem; the training batch size bounds an eval batch's memory."""
        target = spec.workload.target
        if target is None or not target.evaluates:
            return {}
        return {
            "eval_strategy": "steps",
            "eval_steps": target.eval_every * spec.workload.updates_per_step,
            "num_generations_eval": 1,
            "per_device_eval_batch_size": max(1, min(batch, target.eval_problems)),
        }

    def evaluation(self, spec: RunSpec) -> dict[str, Any] | None:
        settings = self._eval_config(spec, self.grpo_config(spec, Path("."))["per_device_train_batch_size"])
        if not settings:
            return None
        return {
            "hook": "TRL GRPOTrainer's evaluation (eval_dataset, eval_strategy='steps'); its logged eval_reward",
            "settings": settings,
            "differences": {
                "decoding": "TRL 1.16 evaluates with its training generation config (do_sample, the training "
                "temperature and top_p); it has no greedy evaluation, so every framework samples alike",
                "timing": "TRL evaluates after the step's metrics line: the evaluation's time falls between steps",
            },
        }

    def equal_work(self, spec: RunSpec, run_dir: Path | None = None) -> dict[str, Any]:
        config = self.grpo_config(spec, Path("."))
        terms = contract(spec.workload, spec.parallel)
        named = {"step_time": STEP_TIME, "train.packing": NO_PACKING}
        if config["use_vllm"]:
            seqs = (
                config["per_device_train_batch_size"]
                * config["vllm_tensor_parallel_size"]
                * config["steps_per_generation"]
            )
            named.update({term: why.format(seqs=seqs) for term, why in VLLM_FIXED.items()})
            named["passes.old_log_prob"] = (
                "TRL 1.16 runs it for its vLLM importance-sampling correction "
                "(vllm_importance_sampling_correction, on by default)"
            )
        else:
            named.update({term: NO_ENGINE for term in terms.to_dict() if term.startswith("engine.")})
            if config["steps_per_generation"] * config["num_iterations"] == 1:
                named["passes.old_log_prob"] = (
                    "TRL skips the old-log-prob forward when each generation feeds "
                    "exactly one update (its own log-probs serve); verl and OpenRLHF "
                    "run it"
                )
        named.update(
            {
                term: COUNT_BATCHES.format(n=config["per_device_train_batch_size"])
                for term in terms.to_dict()
                if term.startswith("budget.")
            }
        )
        resolved, unread = read_resolved(run_dir) if run_dir is not None else (None, None)
        out = manifest(terms, with_betas(config), {**CONTRACT_KEYS, **OPTIM_KEYS}, named, resolved=resolved)
        if unread:
            out["resolved_missing"] = unread
        return out

    def profile_launch(self, spec: RunSpec, run_dir: Path) -> dict[str, Any] | None:
        """--profile torch: torch.profiler around the chosen RL steps, in the launcher (TRL has no profiler
        switch of its own); its Chrome trace lands in the record's profile/ folder."""
        if spec.profile is None:
            return None
        if spec.profile.tool != "torch":
            raise RLBenchError(
                f"--profile {spec.profile.tool}: the TRL adapter maps --profile torch only; run with --profile torch"
            )
        return {**spec.profile.to_dict(), "dir": str(run_dir / PROFILE_DIR)}

    def plan(self, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> LaunchPlan:
        launch = {
            "profile": self.profile_launch(spec, run_dir),
            "model": inputs.model,
            "dataset": spec.workload.data.dataset,
            "chat": spec.workload.prompt.chat,
            "prompts_file": str(run_dir / "prompts.jsonl"),
            "eval_prompts_file": str(run_dir / EVAL_PROMPTS_FILE) if inputs.eval_prompts else None,
            "metrics_file": str(self.metrics_file(run_dir)),
            "resolved_file": str(run_dir / RESOLVED_FILE),
            "updates_per_step": spec.workload.updates_per_step,
            "grpo_config": self.grpo_config(spec, run_dir),
        }
        launcher = ["-m", "rlbench.adapters.trl.launcher", str(run_dir / LAUNCH_FILE)]
        if spec.parallel.dp > 1:
            argv = [
                sys.executable,
                "-m",
                "accelerate.commands.launch",
                "--num_processes",
                str(spec.parallel.dp),
                *launcher,
            ]
        else:
            argv = [sys.executable, *launcher]
        env = {"HF_HUB_OFFLINE": "1"} if spec.workload.model.tiny is not None else {}
        env.update({"TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"})
        return LaunchPlan(argv=argv, env=env, files={LAUNCH_FILE: json.dumps(launch, indent=2)})

    def model_shape(self, spec: RunSpec) -> dict[str, Any]:
        """Micro-batch = per_device_train_batch_size; without vLLM, Hugging Face generate prefills
        each of the G repeated rows of a prompt (no shared prefix) and grows its DynamicCache by
        concatenation; on a CPU the model is fp32."""
        config = self.grpo_config(spec, Path("."))
        fp32 = config["model_init_kwargs"]["dtype"] == "float32" and not config["bf16"]
        return {
            "micro_batch_size": int(config["per_device_train_batch_size"]),
            "shared_prefill": bool(config["use_vllm"]),
            "dtype_bytes": 4 if fp32 else 2,
            "kv_cache": "paged" if config["use_vllm"] else "concat",
        }

    def read_spans(self, run_dir: Path) -> pd.DataFrame | None:
        """The launcher's [stage, start, end] of each timed stage call, per step."""
        rows = []
        for line in self._lines(run_dir):
            for span in line.get("spans") or []:
                if isinstance(span, list) and len(span) == 3:
                    rows.append(
                        {"step": line["step"], "stage": span[0], "start_unix_s": span[1], "end_unix_s": span[2]}
                    )
        return pd.DataFrame(rows, columns=list(SPAN_COLUMNS)) if rows else None

    def _lines(self, run_dir: Path, kind: str = "step") -> list[dict[str, Any]]:
        """The launcher's step lines (read_steps and read_spans both read them), or with kind "eval" its
        evaluation lines ({"step", "eval": TRL's eval logs})."""
        path = self.metrics_file(run_dir)
        lines = []
        for text in path.read_text().splitlines() if path.exists() else []:
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                continue  # the line being written when the launcher was killed: the steps before it count
            if isinstance(line, dict) and "step" in line and ("eval" in line) == (kind == "eval"):
                lines.append(line)
        return lines

    def read_steps(self, run_dir: Path) -> pd.DataFrame:
        steps = pd.DataFrame([normalize(line) for line in self._lines(run_dir)])
        return with_evaluations(steps, self._lines(run_dir, "eval"))
