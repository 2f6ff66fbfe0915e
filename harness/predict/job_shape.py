"""A job's shape as the work-depth model takes it: the workload's lengths and batches, the launch's micro-batching
and engine mode (neutral, or a framework's own, or its CPU lane's), and the --parallel layout.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import (
    NEUTRAL_MICRO_BATCH_TOKENS,
    ParallelShape,
    WorkloadShape,
)
from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload


def workload_shape(
    workload: Workload, *, prompt_len: float | None = None, recompute_old_logprob: bool = True
) -> WorkloadShape:
    """The model's view of a workload; prompt_len defaults to the workload's maximum."""
    return WorkloadShape(
        prompts_per_step=workload.prompts_per_step,
        group_size=workload.algorithm.group_size,
        prompt_len=max(1, round(prompt_len if prompt_len is not None else workload.max_prompt_length)),
        response_len=workload.max_response_length,
        algorithm=workload.algorithm.name,
        use_kl_reference=workload.algorithm.kl_coef > 0,
        recompute_old_logprob=recompute_old_logprob,
        ppo_epochs=workload.algorithm.epochs,
        mini_batch_prompts=workload.mini_batch_prompts,
        gradient_checkpointing=workload.gradient_checkpointing,
        fixed_length=workload.fixed_length,
    )


def neutral_fields(shape: WorkloadShape, parallel: Parallelism | None = None) -> dict[str, Any]:
    """The launch shape without a framework: token-packed micro-batches of NEUTRAL_MICRO_BATCH_TOKENS
    per GPU (never below one whole sequence), as verl's and OpenRLHF's dynamic batching packs them,
    and a CUDA-graph vLLM engine with the equal-work contract's limits (256 sequences; half of a
    colocated GPU, 0.9 of a rollout GPU of its own) where the placement is known."""
    from rlbench.harness.spec.equal_work import GPU_MEMORY_COLOCATED, GPU_MEMORY_DEDICATED, MAX_NUM_SEQS

    fields: dict[str, Any] = {
        "micro_batch_tokens": max(NEUTRAL_MICRO_BATCH_TOKENS, shape.max_seq_len),
        "engine_mode": "cuda_graphs",
        "engine_max_seqs": MAX_NUM_SEQS,
    }
    if parallel is not None:
        fields["engine_memory_fraction"] = (
            GPU_MEMORY_COLOCATED if parallel.placement == "colocated" else GPU_MEMORY_DEDICATED
        )
    return fields


def framework_fields(framework: str, workload: Workload, parallel: Parallelism, lane: bool = False) -> dict[str, Any]:
    """What a framework's launch fixes beyond the workload: its adapter's `model_shape` (micro-batching,
    packing, KV cache, dtype) and the rollout engine's mode from the equal-work contract every adapter
    launches with (CUDA graphs unless enforce_eager; Hugging Face generate, kv_cache "concat", is eager).
    `lane`: the launch on this machine's CPU (its CPU lane's where it has one); otherwise a GPU machine's,
    whatever this machine has (`Adapter.gpu_planner`)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.spec.runspec import RunSpec

    adapter = get_adapter(framework)
    fields = (adapter if lane else adapter.gpu_planner()).launch_shape(
        RunSpec(framework=framework, workload=workload, parallel=parallel), lane
    )
    return {**fields, **engine_fields(workload, parallel, fields)}


def with_derived_dp(pairs: tuple[str, ...] | list[str], gpus: int) -> tuple[str, ...]:
    """`pairs` with the data-parallel degree that `gpus` devices give where the pairs name none: a framework's
    per-device batch follows it (TRL's per_device_train_batch_size). Unchanged where the layout is invalid
    (predict_layout says why)."""
    from rlbench.harness.spec.parallel import parse_parallel

    if any(pair.partition("=")[0].strip() == "dp" for pair in pairs):
        return tuple(pairs)
    try:
        dp = parallel_shape(parse_parallel(pairs), gpus).data_parallel
    except (RLBenchError, ValueError):
        return tuple(pairs)
    return (*pairs, f"dp={dp}")


def launch_shape(
    workload: Workload, framework: str | None, pairs: tuple[str, ...] | list[str], lane: bool = False
) -> WorkloadShape:
    """The workload as launched with these `--parallel` pairs: the framework's launch shape (its CPU lane's
    where `lane`, i.e. on the CPU row), or the neutral one without a framework. A bad pair is an
    RLBenchError, as for `rlbench run`."""
    from rlbench.harness.spec.parallel import parse_parallel

    parallel = parse_parallel(pairs)
    shape = workload_shape(workload)
    fields = framework_fields(framework, workload, parallel, lane) if framework else neutral_fields(shape, parallel)
    return dataclasses.replace(shape, **fields)


def engine_fields(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> dict[str, Any]:
    """The rollout engine's mode and limits as every adapter launches it (the equal-work contract)."""
    from rlbench.harness.spec.equal_work import contract

    engine = contract(workload, parallel).engine
    if fields.get("kv_cache") == "concat":  # Hugging Face generate: eager, the whole batch at once
        return {"engine_mode": "eager"}
    return {
        "engine_mode": engine_mode(workload, parallel, fields),
        "engine_max_seqs": engine.max_num_seqs,
        "engine_memory_fraction": engine.gpu_memory_utilization,
    }


def engine_mode(workload: Workload, parallel: Parallelism, fields: dict[str, Any]) -> str:
    """'eager' for Hugging Face generate (no paged cache), a launch that says so (vLLM's CPU build on a lane) or an
    engine launched with enforce_eager."""
    from rlbench.harness.spec.equal_work import contract

    eager = fields.get("kv_cache") == "concat" or fields.get("engine_mode") == "eager"
    return "eager" if eager or contract(workload, parallel).engine.enforce_eager else "cuda_graphs"


def parallel_shape(parallel: Parallelism, gpus: int | None = None) -> ParallelShape:
    """The model's view of the knobs, each straight through; dp is derived when gpus is given.

    Disaggregated placement gives the rollout half of the GPUs (verl's and OpenRLHF's usual split).
    pp_virtual > 1 is Megatron's interleaved schedule; async=K is k-step with staleness K. Sharding
    follows the backend the knobs select: trainer tp, pp, cp or ep is Megatron's distributed
    optimizer ("optimizer"), otherwise FSDP ("full").
    """
    total = gpus or parallel.world_size
    rollout_gpus = total // 2 if parallel.placement == "disaggregated" else 0
    shape = ParallelShape(
        gpus=total,
        dp=None if gpus else parallel.dp,
        tp=parallel.tp,
        pp=parallel.pp,
        pp_schedule="interleaved" if parallel.pp_virtual > 1 else "1f1b",
        pp_virtual=parallel.pp_virtual,
        cp=parallel.cp,
        ep=parallel.ep,
        etp=parallel.etp,
        sp=parallel.sp,
        rollout_tp=parallel.rollout_tp,
        placement=parallel.placement,
        rollout_gpus=rollout_gpus,
        sharding="optimizer" if parallel.megatron_knobs else "full",
        fuse=parallel.fuse,
        async_mode=parallel.async_mode,
        async_staleness=parallel.async_depth if parallel.async_mode == "k-step" else 1,
        partial_rollout=parallel.partial_rollout == "on",
    )
    if gpus and "dp" in parallel.non_default() and shape.data_parallel != parallel.dp:
        raise RLBenchError(
            f"--parallel dp={parallel.dp} does not agree with --gpus {gpus}: the trainer's "
            f"{shape.trainer_gpus} GPUs over tp x pp x sp x cp = {shape.tp * shape.pp * shape.sp * shape.cp} "
            f"give dp={shape.data_parallel}; drop dp (it follows from --gpus) or set --gpus to match"
        )
    return shape
