"""Cost of generation: prefill of the prompts and the decode loop, on the rollout pool.

The pool (all GPUs when colocated, `rollout_gpus` when disaggregated) runs
`rollout_replicas` engines of `rollout_tp` GPUs; the step's sequences are split evenly.

* Prefill: the G samples of a prompt share its KV cache (vLLM's n > 1 / prefix caching),
  so each prompt is prefilled once (shared_prefill=False: every sequence, as Hugging Face
  generate does with G repeated rows). Sharing is by whole KV blocks: each other sample still
  prefills the tokens after the prompt's last whole block (unshared_prompt_len; vLLM's CUDA
  block is 16 tokens, its CPU block 128, so a CPU lane's short prompts are prefilled by every
  sample). A left-padded batch (padded_prompt_len) prefills and caches its pads as well.
  Compute-bound for prompts of hundreds of tokens. The head runs on the last prompt position
  only (flops.prefill_flops). One forward of the replica's batch: depth L + 2 units.
* Decode: each step of an engine streams its weight shard from HBM once and reads the KV
  cache of every live sequence; FLOPs are 2N + 4*L*A*t per token. Memory-bound until the
  per-engine batch approaches peak / bandwidth (about 295 sequences on an H100).
  The KV traffic belongs to attention kernels that run between the projections' GEMMs, not
  under them, so its time adds to theirs (roofline `serial_bytes`). How much traffic a cached
  token costs per step depends on the engine's cache (kv_traffic_per_cached_token).
  Steps = the longest response: a batch of an RL step is fixed, so the engine keeps
  stepping (and reading its weights) until its last sequence ends. FLOPs and KV reads use
  the mean response length. With k batches in flight (k-step async on its own pool,
  ParallelShape.batches_in_flight) the engine decodes k batches at once, so one RL step's
  share is longest / k steps, each over k batches' sequences.
  Depth: every step is one forward of the batch, L + 2 units (roofline.pass_units), so a
  decode of R steps has depth R * (L + 2): on a latency-bound device (a small model, a CPU)
  the span, not the roofline, sets the time.
* Tensor parallelism: 2 all-reduces per layer of the batch's activations (Megatron-LM), each
  paying its latency (comm.all_reduce_latency_s, NCCL's cost model): a decode step's all-reduces
  carry a few KB, so over thousands of steps their latency, not their bytes, is what they cost; an
  engine spanning two nodes pays the network's.
* Mixture of experts: a decode step reads the dense weights and only the experts its batch
  routes to, E(1 - (1 - k/E)^B) of E for B sequences under uniform routing
  (parallelism.experts_touched): at B = 1, k of E; at a few dozen sequences, nearly all.
  FLOPs count the active experts only (flops.py). Prefill reads every expert.

    from rlbench.harness.perfmodel.rollout import decode_stage
    stage = decode_stage(arch, shape, parallel, hw, achievable=1.0)
    stage.bound        # "memory" for a 7B model at a few dozen sequences per GPU
"""

from __future__ import annotations

import math

from rlbench.harness.perfmodel import flops as fl
from rlbench.harness.perfmodel.arch import ModelArch
from rlbench.harness.perfmodel.comm import Collective, all_reduce_bytes, all_reduce_latency_s, merge, ring_bandwidth
from rlbench.harness.perfmodel.hardware import Hardware
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.parallelism import experts_touched
from rlbench.harness.perfmodel.roofline import StageCost, Work, build_stage, empty_stage, pass_units
from rlbench.harness.perfmodel.shapes import WorkloadShape


def kv_bytes_per_token_per_gpu(arch: ModelArch, tp: int, dtype_bytes: int = 2) -> float:
    """A token's KV cache on one GPU of a tp-wide engine (KV heads replicate when tp > kv_heads)."""
    heads_per_gpu = math.ceil(arch.kv_heads / tp)
    return arch.kv_bytes_per_token(dtype_bytes) * heads_per_gpu / arch.kv_heads


def kv_traffic_per_cached_token(kv_cache: str) -> float:
    """Reads + writes of each cached token's K and V per decode step.

    * "paged" (vLLM, SGLang): the attention kernel reads it once; the new token is written in place.
    * "concat" (Hugging Face DynamicCache, transformers 5 cache_utils.DynamicLayer.update):
      torch.cat([cache, new]) reads the cache and writes it again (2), then SDPA reads it (1).
      Grouped KV heads are not expanded at decode: for a single query token transformers packs
      the query heads onto the KV heads (integrations/sdpa_attention.pack_gqa) instead of
      repeat_kv; a profile of padded-batch generate at hidden 512 showed no copy beyond the cats.
    """
    return 1.0 if kv_cache == "paged" else 3.0


def _tp_all_reduces(
    arch: ModelArch, hw: Hardware, tp: int, tokens: float, count: float, dtype_bytes: int = 2
) -> list[Collective]:
    if tp == 1:
        return []
    size = all_reduce_bytes(tp, tokens * arch.hidden * dtype_bytes)
    calls = count * 2 * arch.layers
    return [
        Collective(
            kind="tp_all_reduce",
            bytes_per_gpu=calls * size,
            bandwidth=ring_bandwidth(hw, tp, 1),
            latency_s=calls * all_reduce_latency_s(hw, tp),
        )
    ]


def step_weight_bytes(arch: ModelArch, batch: float, dtype_bytes: int = 2) -> float:
    """Weight bytes one decode step of `batch` sequences reads: all of them for a dense model; the dense
    part and the experts the batch routes to for an MoE one."""
    weights = arch.weight_bytes(dtype_bytes)
    if not arch.is_moe:
        return weights
    experts = arch.expert_params() * dtype_bytes
    return weights - experts + experts * experts_touched(arch.moe_experts, arch.moe_top_k, batch) / arch.moe_experts


def unshared_prompt_len(width: float, block_tokens: int) -> float:
    """Prompt tokens each further sample of a prompt computes itself under prefix caching: what follows the
    prompt's last whole cached block (a hit stops at width - 1, so at least the last token); the whole prompt
    when it is shorter than a block."""
    if width <= 0:
        return 0.0
    return width - block_tokens * math.floor((width - 1) / block_tokens)


def prefill_stage(
    arch: ModelArch, shape: WorkloadShape, par: ParallelShape, hw: Hardware, *, achievable: float
) -> StageCost:
    if shape.prompt_len == 0:
        return empty_stage("generation_prefill", note="no prompt tokens")
    tp, replicas, pool = par.rollout_tp, par.rollout_replicas, par.rollout_pool_gpus
    width = shape.computed_prompt_len  # a left-padded batch prefills its pads too
    # A replica prefills what it decodes. With prefix sharing, one sample per prompt prefills the whole prompt
    # and each other sample the part after its whole cached blocks; without, every sequence the whole prompt.
    prefills = max(shape.prompts_per_step, min(shape.sequences, replicas)) if shape.shared_prefill else shape.sequences
    tails = shape.sequences - prefills
    tail = unshared_prompt_len(width, shape.prefix_block_tokens) if tails else 0.0
    per_replica, tails_per_replica = math.ceil(prefills / replicas), math.ceil(tails / replicas)
    per_prompt = fl.prefill_flops(arch, width)
    per_tail = fl.sequence_forward_flops(arch, tail, start=width - tail, head_positions=min(tail, 1)) if tail else 0.0
    kvb = arch.kv_bytes_per_token(shape.dtype_bytes)
    weights = arch.weight_bytes(shape.dtype_bytes)
    busy = min(replicas, prefills)  # replicas with work
    rows = per_replica * width + tails_per_replica * tail
    comm = merge(_tp_all_reduces(arch, hw, tp, rows, 1, shape.dtype_bytes))
    critical = Work(
        flops=(per_replica * per_prompt + tails_per_replica * per_tail) / tp,
        bytes=(weights + rows * kvb) / tp,
        comm=comm,
    )
    if not shape.shared_prefill:
        note = "every sequence prefilled (no prefix sharing)"
    elif tail:
        note = (
            f"prompt KV shared by the group's samples in whole {shape.prefix_block_tokens}-token blocks; "
            f"each other sample prefills {tail:g} of its {width:g} prompt tokens"
        )
    else:
        note = "prompt KV shared by the group's samples"
    return build_stage(
        "generation_prefill",
        hw=hw,
        achievable=achievable,
        gpus=pool,
        flops=prefills * per_prompt + tails * per_tail,
        bytes=busy * weights + (prefills * width + tails * tail) * kvb,
        comm=comm,
        depth=pass_units(arch.layers),
        critical=critical,
        matmul_rows=rows,
        matmul_dim=arch.hidden,
        note=note,
    )


def decode_stage(
    arch: ModelArch,
    shape: WorkloadShape,
    par: ParallelShape,
    hw: Hardware,
    *,
    achievable: float,
    engine_steps: int | None = None,
) -> StageCost:
    """engine_steps: the engine's decode steps for this RL step (the estimate's, overheads.engine_steps);
    None: the bound's, the longest response over the batches in flight."""
    tp, replicas, pool = par.rollout_tp, par.rollout_replicas, par.rollout_pool_gpus
    seqs = shape.sequences
    per_replica = math.ceil(seqs / replicas)
    steps = engine_steps if engine_steps is not None else par.decode_depth(shape)
    busy = min(replicas, seqs)
    # a left-padded batch's cache holds its pads: attention reads them and torch.cat copies them
    mean_r, prompt = shape.mean_response, shape.computed_prompt_len
    per_seq_flops = fl.decode_flops(arch, prompt, mean_r)
    kvb = arch.kv_bytes_per_token(shape.dtype_bytes)
    traffic = kv_traffic_per_cached_token(shape.kv_cache)
    per_seq_kv = kvb * (traffic * fl.decode_kv_read_tokens(prompt, mean_r) + mean_r)  # reads + writes
    live = per_replica * par.batches_in_flight  # sequences an engine step decodes
    weights = step_weight_bytes(arch, live, shape.dtype_bytes)
    comm = merge(_tp_all_reduces(arch, hw, tp, live, steps, shape.dtype_bytes))
    replica_kv = per_replica * per_seq_kv * kv_bytes_per_token_per_gpu(arch, tp, shape.dtype_bytes) / kvb
    critical = Work(
        flops=per_replica * per_seq_flops / tp,
        bytes=steps * weights / tp + replica_kv,
        serial_bytes=replica_kv,
        comm=comm,
    )
    note = "memory-bound below ~peak/bandwidth sequences per engine"
    if par.partial_rollout:
        note = f"{steps} steps (partial rollout: slots refill, no batch waits for its longest)"
    elif shape.lengths is not None:
        note = (
            f"{steps} steps (expected longest of the batch's {seqs * par.batches_in_flight} responses, mean "
            f"{mean_r:g}, p{round(shape.response_tail_quantile * 100)} {shape.response_tail_len:g})"
        )
    elif not shape.fixed_length:
        note = f"{steps} steps (longest response); FLOPs and KV at the mean {mean_r:g}"
    if par.batches_in_flight > 1:
        note += f"; {par.batches_in_flight} batches in flight"
    return build_stage(
        "generation_decode",
        hw=hw,
        achievable=achievable,
        gpus=pool,
        flops=seqs * per_seq_flops,
        bytes=busy * steps * weights + seqs * per_seq_kv,
        comm=comm,
        depth=steps * pass_units(arch.layers),
        critical=critical,
        note=note,
        # one token per sequence per step; each step reads the engine's whole weight shard
        matmul_rows=live,
        matmul_dim=arch.hidden,
        weight_bytes=weights / tp,
    )
