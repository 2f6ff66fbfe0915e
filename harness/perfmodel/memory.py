"""Peak device memory per GPU of one RL step, by component.

Model states (Rajbhandari et al. 2020, ZeRO, sec. 3.1: mixed-precision Adam keeps 16 bytes
per parameter): bf16 weights 2 + bf16 gradients 2 + fp32 master weights, m and v 12.
tp x pp always divide them; over dp x sp, sharding="full" (FSDP / ZeRO-3) shards all 16,
"optimizer" (ZeRO-1 / Megatron distributed optimizer) only the 12, "none" none.
The frozen reference model keeps 2 bytes per parameter (sharded alike), a PPO critic the
full 16, a reward model 2.

Expert parallelism (MoE): ep ranks split the routed experts, so a rank's model-parallel shard
is dense / (tp x pp) + experts / (etp x pp x ep) (etp = tp unless set). Whatever dp x sp x cp shards
("full", and the optimizer states under "optimizer") comes out the same either way, since the
experts are then sharded over the remaining (tp / etp) x dp x sp x cp / ep ranks; ep saves what is
not sharded (weights and
gradients under the distributed optimizer, everything under DDP). Context parallelism divides
the activations by cp, as Ulysses' sp does.

Activations of the largest micro-batch (micro_batch_size longest sequences, or a packed
micro_batch_tokens budget holding at least one) (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", eq. 1 with tensor+sequence
parallelism, dropping the 5as/h attention-score term that FlashAttention does not store):
34 bytes per token per hidden unit per layer, / tp. The first pipeline stage holds pp
micro-batches of L/pp layers, i.e. all L layers' worth. With checkpointing only each
layer's bf16 input (2 bytes) is kept, plus one layer being recomputed. Logits add 6 bytes
per token per vocabulary entry / tp (bf16 logits and their fp32 log-softmax). The 34 was
derived for a 4h GELU MLP; for gated MLPs treat activations as accurate to about 2x.

Rollout: bf16 weights / rollout_tp plus the KV cache of the engine's share of the batch at
prompt + mean response length (no sequence holds more than its final length; with fixed
lengths this is the full length). vLLM pre-allocates more (gpu_memory_utilization). Colocated GPUs hold the
trainer's model states throughout and alternate activations with the engine (verl frees
the engine's memory while training); disaggregated pools are reported separately.

    from rlbench.harness.perfmodel.memory import estimate_memory
    mem = estimate_memory(arch, shape, parallel, hw)
    mem.per_gpu_gb, mem.breakdown_gb, mem.fits
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlbench.harness.perfmodel.arch import ModelArch
from rlbench.harness.perfmodel.hardware import Hardware
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.rollout import kv_bytes_per_token_per_gpu
from rlbench.harness.perfmodel.shapes import WorkloadShape
from rlbench.harness.perfmodel.stages import critic_params
from rlbench.harness.perfmodel.trainer_comm import experts_apart, local_params

GIGA = 1e9
ACTIVATION_BYTES_PER_TOKEN_HIDDEN_LAYER = 34


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryEstimate:
    per_gpu_gb: float  # the most any one GPU needs at its peak
    trainer_gb: float
    rollout_gb: float
    breakdown_gb: dict[str, float]
    fits: bool | None  # per_gpu_gb <= capacity; None when the capacity is unknown


def _activations(arch: ModelArch, shape: WorkloadShape, par: ParallelShape) -> float:
    tokens = shape.micro_batch_tokens_peak / (par.sp * par.cp)
    per_layer = ACTIVATION_BYTES_PER_TOKEN_HIDDEN_LAYER * tokens * arch.hidden / par.tp
    if shape.gradient_checkpointing:
        body = 2 * tokens * arch.hidden * arch.layers / par.tp + per_layer
    else:
        body = per_layer * arch.layers
    return body + 6 * tokens * arch.vocab / par.tp


def estimate_memory(arch: ModelArch, shape: WorkloadShape, par: ParallelShape, hw: Hardware) -> MemoryEstimate:
    params = arch.param_count().total
    mp = par.tp * par.pp
    split, opt_split = mp * par.param_shards, mp * par.optimizer_shards

    def shard(count: int, sharded: bool) -> float:
        """Parameters per GPU under expert parallelism: sharded over dp x sp x cp (dense part over all of
        them, experts over the expert data-parallel group after etp x ep split them: count / (mp x dp_group)
        either way), or else the model-parallel shard (trainer_comm.local_params)."""
        return count / (mp * par.dp_group) if sharded else local_params(arch, par, count)  # type: ignore[return-value]

    full, zero = par.sharding == "full", par.sharding != "none"
    ep_moe = experts_apart(arch, par)
    if not ep_moe:
        parts = {"params": 2 * params / split, "grads": 2 * params / split, "optimizer": 12 * params / opt_split}
    else:
        parts = {
            "params": 2 * shard(params, full),
            "grads": 2 * shard(params, full),
            "optimizer": 12 * shard(params, zero),
        }
    critic = critic_params(arch)
    if shape.use_kl_reference:
        parts["ref_params"] = 2 * shard(params, full) if ep_moe else 2 * params / split
    if shape.has_critic:
        parts["critic_states"] = (
            4 * shard(critic, full) + 12 * shard(critic, zero)
            if ep_moe
            else 4 * critic / split + 12 * critic / opt_split
        )
    if shape.reward_model:
        parts["reward_params"] = 2 * shard(critic, full) if ep_moe else 2 * critic / split
    if par.param_shards > 1:  # two layers gathered at once (current + prefetch); ep ranks gather their experts only
        body = arch.param_count().non_embedding / par.tp
        if ep_moe:
            experts = arch.expert_params()
            body += experts / (par.expert_tp * par.ep) - experts / par.tp
        parts["fsdp_buffers"] = 2 * 2 * body / arch.layers
    states = sum(parts.values())
    parts["activations"] = _activations(arch, shape, par)
    per_engine = math.ceil(shape.sequences / par.rollout_replicas)
    parts["rollout_weights"] = arch.weight_bytes() / par.rollout_tp
    # a left-padded batch caches its pads too
    cached = shape.computed_prompt_len + shape.mean_response
    parts["kv_cache"] = per_engine * cached * kv_bytes_per_token_per_gpu(arch, par.rollout_tp)
    rollout = parts["rollout_weights"] + parts["kv_cache"]
    trainer = states + parts["activations"]
    if par.placement == "colocated":
        peak = states + max(parts["activations"], rollout)
        trainer = rollout = peak
    else:
        peak = max(trainer, rollout)
    fits = None if hw.hbm_bytes is None else peak <= hw.hbm_bytes
    return MemoryEstimate(
        per_gpu_gb=peak / GIGA,
        trainer_gb=trainer / GIGA,
        rollout_gb=rollout / GIGA,
        breakdown_gb={k: v / GIGA for k, v in parts.items()},
        fits=fits,
    )
