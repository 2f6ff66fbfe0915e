"""Work-depth performance model of an RL-for-LLM training step: pure functions and cited tables.

No I/O (except `load_hf_config`, which reads one config.json), no framework imports. Each
stage costs a roofline work term W/p and a depth term D * t (D sequential layer-sized units,
t the hardware's measured op latency; None on datasheet rows, which then get W/p alone, a
lower bound with the default achievable fraction 1.0); Brent's bounds max(W/p, D t) and
W/p + D t bracket a greedy schedule (roofline.py says which one is predicted, and why).
Formulas and sources are in each module's docstring and in docs/perfmodel.md.

    from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict
    work = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)
    p = predict("Qwen2.5-7B-Instruct", work, ParallelShape(gpus=8), "H100-SXM")
    print(p.step_time_s, p.tokens_per_s, p.mfu, p.memory_per_gpu_gb)

Modules: arch (shapes, parameter counts, built-in models), hardware (datasheet rows),
shapes (workload and layout), flops (FLOP formulas), comm (collective bytes), roofline
(stage timing, depth and Brent bounds), rollout and stages (the ten stages), parallelism
(TP/PP/CP/EP/async formulas) and trainer_comm (a trainer pass's collectives), memory (per-GPU
memory), floor (a framework's measured per-step floor), predict (the step DAG), sweep (ranked
layouts; sweep_layouts over the whole taxonomy, docs/parallelism.md).
"""

from __future__ import annotations

from rlbench.harness.perfmodel import flops
from rlbench.harness.perfmodel.arch import (
    BUILTIN_ARCHS,
    ModelArch,
    ParamCount,
    from_hf_config,
    get_arch,
    load_hf_config,
)
from rlbench.harness.perfmodel.comm import Collective
from rlbench.harness.perfmodel.floor import MODEL_STAGE, UNSTAGED, FrameworkFloor, measure_floor
from rlbench.harness.perfmodel.hardware import HARDWARE, Hardware, cpu_hardware, find_hardware, get_hardware
from rlbench.harness.perfmodel.lengths import TAIL_Z, ResponseLengths
from rlbench.harness.perfmodel.memory import MemoryEstimate, estimate_memory
from rlbench.harness.perfmodel.overheads import FITTED, NO_FITTED_TERMS, FittedTerms, engine_steps, engine_tokens
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.predict import Prediction, combine_stages, predict
from rlbench.harness.perfmodel.roofline import StageCost
from rlbench.harness.perfmodel.shapes import NEUTRAL_MICRO_BATCH_TOKENS, WorkloadShape
from rlbench.harness.perfmodel.stages import build_stages
from rlbench.harness.perfmodel.sweep import LAYOUT_AXES, LayoutSweep, SkippedLayout, sweep, sweep_layouts

__all__ = [
    "FITTED",
    "LAYOUT_AXES",
    "MODEL_STAGE",
    "NEUTRAL_MICRO_BATCH_TOKENS",
    "NO_FITTED_TERMS",
    "TAIL_Z",
    "UNSTAGED",
    "FittedTerms",
    "ResponseLengths",
    "combine_stages",
    "engine_steps",
    "engine_tokens",
    "BUILTIN_ARCHS",
    "HARDWARE",
    "Collective",
    "FrameworkFloor",
    "Hardware",
    "MemoryEstimate",
    "ModelArch",
    "ParallelShape",
    "ParamCount",
    "Prediction",
    "StageCost",
    "WorkloadShape",
    "build_stages",
    "cpu_hardware",
    "estimate_memory",
    "find_hardware",
    "flops",
    "from_hf_config",
    "get_arch",
    "get_hardware",
    "load_hf_config",
    "measure_floor",
    "predict",
    "sweep",
    "LayoutSweep",
    "SkippedLayout",
    "sweep_layouts",
]
