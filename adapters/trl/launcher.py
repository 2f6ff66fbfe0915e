"""The process the TRL adapter launches: TRL's own GRPOTrainer, instrumented for metrics.

Runs as `python -m rlbench.adapters.trl.launcher LAUNCH.json` (or under
`accelerate launch` for data parallel). It builds `trl.GRPOConfig` from the
adapter's keyword arguments, trains with TRL's unmodified `GRPOTrainer` loop, and
appends one JSON line per RL step to the metrics file:

    {"step": 1, "trl": {<TRL's own logged metrics>}, "stages_s": {...},
     "tokens": {"prompt": 1536, "response": 512, "responses": 16}, "step_time_s": 2.1, "memory": {...}}

Stage times come from a thin subclass that times TRL's own stage methods
(`_generate`, `_calculate_rewards`, `_get_per_token_logps_and_entropies`); the
step wall time and the flush come from a `TrainerCallback`. Nothing of TRL's
algorithm is changed. Once the trainer is built, what TRL resolved (the trainer's `args`
and the generation settings it really uses) is written to the run folder's
`trl_resolved.json`, which the adapter's `equal_work` reads back.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rlbench.harness.atomic import write_bytes
from rlbench.workloads.prompts import read_prompts
from rlbench.workloads.rewards import score


def _rss_peak_gb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def make_reward_func(dataset: str):
    """TRL reward function calling rlbench's shared scorer; named so TRL logs rewards/<dataset>/mean."""

    def reward(completions, ground_truth, **_: Any) -> list[float]:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        return [score(dataset, text, gt) for text, gt in zip(texts, ground_truth)]

    reward.__name__ = dataset
    return reward


def build_dataset(prompts_file: Path, chat: bool):
    from datasets import Dataset

    rows = [
        {
            "prompt": [{"role": "user", "content": r.prompt}] if chat else r.prompt,
            "ground_truth": r.ground_truth,
            "uid": r.uid,
        }
        for r in read_prompts(prompts_file)
    ]
    return Dataset.from_list(rows)


def instrumented_trainer_class():
    """GRPOTrainer subclass that accumulates wall time per RL stage and counts tokens."""
    import torch
    from trl import GRPOTrainer

    class InstrumentedGRPOTrainer(GRPOTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.rlbench_stages: dict[str, float] = defaultdict(float)
            self.rlbench_tokens: dict[str, int] = defaultdict(int)
            self.rlbench_spans: list[list[Any]] = []  # [stage, start unix s, end unix s]: when, not only how long
            self.rlbench_lengths: list[int] = []  # each response's generated tokens (EOS included), this step

        def _timed(self, stage: str, fn, *args: Any, **kwargs: Any):
            if not self.model.training:  # TRL's evaluation (an eval_accuracy target): between steps, in no stage
                return fn(*args, **kwargs)
            start, start_unix = time.perf_counter(), time.time()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds = time.perf_counter() - start
                self.rlbench_stages[stage] += seconds
                self.rlbench_spans.append([stage, start_unix, start_unix + seconds])

        def _generate(self, prompts):
            return self._timed("gen", super()._generate, prompts)

        def _calculate_rewards(self, *args: Any, **kwargs: Any):
            return self._timed("reward", super()._calculate_rewards, *args, **kwargs)

        def _get_per_token_logps_and_entropies(self, model, *args: Any, **kwargs: Any):
            if torch.is_grad_enabled():  # the policy forward inside the loss: part of the update
                return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
            stage = "ref" if model is getattr(self, "ref_model", None) else "old_log_prob"
            return self._timed(stage, super()._get_per_token_logps_and_entropies, model, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            if not self.model.training:  # evaluation batches are no step's experience or tokens
                return super()._generate_and_score_completions(inputs)
            start, start_unix = time.perf_counter(), time.time()
            output = super()._generate_and_score_completions(inputs)
            self.rlbench_stages["make_experience"] += time.perf_counter() - start
            self.rlbench_experience_end = start_unix + time.perf_counter() - start
            # The masks are TRL's own: the tokens it generated and trains on (EOS included).
            self.rlbench_tokens["prompt"] += int(output["prompt_mask"].sum().item())
            # TRL left-pads a batch to its longest prompt, and generate and the loss compute on every position.
            self.rlbench_tokens["prompt_padded"] += int(output["prompt_mask"].numel())
            self.rlbench_tokens["response"] += int(output["completion_mask"].sum().item())
            self.rlbench_tokens["responses"] += int(output["completion_mask"].shape[0])
            self.rlbench_lengths.extend(int(n) for n in output["completion_mask"].sum(dim=1).tolist())
            return output

    return InstrumentedGRPOTrainer


def metrics_callback(metrics_file: Path, updates_per_step: int):
    import torch
    from transformers import TrainerCallback

    class RLBenchMetrics(TrainerCallback):
        """Writes one line per RL step (= updates_per_step optimiser steps) from TRL's own log."""

        def __init__(self) -> None:
            self.trainer = None
            self.step_start: float | None = None
            self.step_start_unix = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step % updates_per_step == 0:
                self.step_start = time.perf_counter()
                self.step_start_unix = time.time()  # wall clock, to align with telemetry samples

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or "train_runtime" in logs:
                return
            if state.global_step % updates_per_step != 0 or self.step_start is None:
                return
            if any(key.startswith("eval_") for key in logs):  # TRL's evaluation, logged after the step's line
                line = {"step": state.global_step // updates_per_step, "eval": logs}
                with metrics_file.open("a") as handle:
                    handle.write(json.dumps(line) + "\n")
                return
            flush_start = time.perf_counter()
            stages = dict(self.trainer.rlbench_stages)
            step_time = flush_start - self.step_start
            line = {
                "step": state.global_step // updates_per_step,
                "global_step": state.global_step,
                "step_time_s": step_time,
                "step_start_unix_s": self.step_start_unix,
                "step_end_unix_s": self.step_start_unix + step_time,
                "stages_s": stages,
                "tokens": dict(self.trainer.rlbench_tokens),
                "response_lengths": list(self.trainer.rlbench_lengths),
                "memory": {
                    "peak_host_rss_gb": _rss_peak_gb(),
                    "peak_device_memory_gb": torch.cuda.max_memory_allocated() / 1e9
                    if torch.cuda.is_available()
                    else None,
                },
                "trl": logs,
                # the update: from the end of the step's experience to its log (backward, optimizer, logging)
                "spans": self.trainer.rlbench_spans
                + [
                    [
                        "update_actor",
                        getattr(self.trainer, "rlbench_experience_end", self.step_start_unix),
                        self.step_start_unix + step_time,
                    ]
                ],
            }
            # rlbench's own cost inside the framework process: this flush (the timers are ~us).
            line["rlbench_flush_s"] = time.perf_counter() - flush_start
            with metrics_file.open("a") as handle:
                handle.write(json.dumps(line) + "\n")
            self.trainer.rlbench_stages.clear()
            self.trainer.rlbench_tokens.clear()
            self.trainer.rlbench_spans = []
            self.trainer.rlbench_lengths = []

    return RLBenchMetrics()


def profiler_callback(profile: dict[str, Any], updates_per_step: int):
    """torch.profiler from the start of RL step first_step to the log of last_step, its Chrome trace exported
    after that step's metrics line, so the export's time falls between steps, not in a profiled one."""
    import os

    import torch
    from transformers import TrainerCallback

    first, last = profile["steps"]

    class RLBenchProfiler(TrainerCallback):
        def __init__(self) -> None:
            self.profiler = None

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step % updates_per_step or self.profiler is not None:
                return
            if state.global_step // updates_per_step + 1 == first:
                activities = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                self.profiler = torch.profiler.profile(activities=activities)
                self.profiler.__enter__()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.profiler is None or state.global_step % updates_per_step or "train_runtime" in (logs or {}):
                return
            if state.global_step // updates_per_step >= last:
                self.profiler.__exit__(None, None, None)
                out = Path(profile["dir"])
                out.mkdir(parents=True, exist_ok=True)
                rank = int(os.environ.get("RANK", "0"))
                self.profiler.export_chrome_trace(str(out / f"torch-steps-{first}-{last}-rank{rank}.json"))
                self.profiler = None

    return RLBenchProfiler()


def main(launch_file: str) -> None:
    launch = json.loads(Path(launch_file).read_text())
    from trl import GRPOConfig

    config = GRPOConfig(**launch["grpo_config"])
    callback = metrics_callback(Path(launch["metrics_file"]), launch["updates_per_step"])
    callbacks = [callback]  # the metrics line first: a profiled step's export comes after it is logged
    if launch.get("profile"):
        callbacks.append(profiler_callback(launch["profile"], launch["updates_per_step"]))
    held_out = launch.get("eval_prompts_file")  # an eval_accuracy target's held-out problems, else None
    trainer = instrumented_trainer_class()(
        model=launch["model"],
        reward_funcs=[make_reward_func(launch["dataset"])],
        args=config,
        train_dataset=build_dataset(Path(launch["prompts_file"]), launch["chat"]),
        eval_dataset=build_dataset(Path(held_out), launch["chat"]) if held_out else None,
        callbacks=callbacks,
    )
    callback.trainer = trainer
    if trainer.accelerator.is_main_process and launch.get("resolved_file"):  # absent from older launch files
        write_resolved(Path(launch["resolved_file"]), trainer.args, generation_settings(trainer))
    _write_start_event(Path(launch["metrics_file"]), trainer)
    trainer.train()


def json_safe(value: Any) -> Any:
    """`value` as plain JSON (strict: no NaN); what JSON cannot hold becomes its repr."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    return repr(value)


def generation_settings(trainer) -> dict[str, Any]:
    """The generation settings GRPOTrainer really uses, where they live outside its args: the vLLM engine
    it built (colocate mode) or the transformers GenerationConfig it generates with."""
    vllm = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    if vllm is not None:
        engine = {
            name: getattr(vllm, name, None)
            for name in (
                "mode",
                "tensor_parallel_size",
                "gpu_memory_utilization",
                "max_num_seqs",
                "enable_sleep_mode",
                "max_model_length",
                "generation_kwargs",
            )
        }
        # What vLLM itself resolved from TRL's arguments (colocate mode holds the LLM in this process).
        config = getattr(getattr(getattr(vllm, "llm", None), "llm_engine", None), "vllm_config", None)
        if config is not None:
            engine["vllm_resolved"] = {
                "max_num_seqs": getattr(config.scheduler_config, "max_num_seqs", None),
                "max_num_batched_tokens": getattr(config.scheduler_config, "max_num_batched_tokens", None),
                "enable_prefix_caching": getattr(config.cache_config, "enable_prefix_caching", None),
                "gpu_memory_utilization": getattr(config.cache_config, "gpu_memory_utilization", None),
                "enforce_eager": getattr(config.model_config, "enforce_eager", None),
                "max_model_len": getattr(config.model_config, "max_model_len", None),
            }
        return {"backend": "vllm", "vllm": engine}
    config = getattr(trainer, "generation_config", None)
    return {"backend": "transformers", "generation_config": config.to_diff_dict() if config is not None else None}


def write_resolved(path: Path, args, generation: dict[str, Any] | None) -> None:
    """What TRL resolved, as JSON: `args` (the GRPOConfig as GRPOTrainer holds it after construction,
    `to_dict()`) and the generation settings it really uses; written atomically."""
    import trl

    resolved = {"trl": trl.__version__, "args": args.to_dict(), "generation": generation}
    write_bytes(path, json.dumps(json_safe(resolved), indent=1, allow_nan=False).encode())


def _write_start_event(metrics_file: Path, trainer) -> None:
    """What the framework process itself runs on: torch/CUDA build and device."""
    import torch
    import trl

    event = {
        "event": "start",
        "trl": trl.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(trainer.accelerator.device),
        "num_processes": trainer.accelerator.num_processes,
        "model_parameters": sum(p.numel() for p in trainer.model.parameters()),
    }
    if trainer.accelerator.is_main_process:
        with metrics_file.open("a") as handle:
            handle.write(json.dumps(event) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
