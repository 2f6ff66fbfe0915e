"""Closed-form terms of trainer parallelism: TP, PP, CP, EP and asynchrony, one pure function each.

stages.py and predict.py build a step from these; tests/perfmodel/test_perfmodel_parallelism.py checks
each against a hand count and, where one exists, a published number. Sizes are bytes, times
seconds; every byte count is per GPU and per direction (comm.py's convention).

* Tensor parallelism (Shoeybi et al. 2019, Megatron-LM, sec. 3): attention and MLP each end
  in one all-reduce of the layer's activations (b*s*h) forward and one backward: 2 + 2 per layer.
* Pipeline (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
  Clusters Using Megatron-LM", sec. 2.2): with m micro-batches over p stages, 1F1B idles
  (p - 1) micro-batch slots, a bubble of (p - 1) / m of the ideal time, i.e. (p - 1) / (m + p - 1)
  of the step; the interleaved schedule with v model chunks per rank idles (p - 1) / v slots,
  (p - 1) / (v*m + p - 1) of the step, and sends v times as many activations between stages.
* Context parallelism, ring attention (Liu et al. 2023, "Ring Attention with Blockwise
  Transformers"; Megatron-Core's context_parallel p2p): each of cp ranks holds S/cp tokens and
  passes its K and V block round the ring, cp - 1 hops a layer forward; the backward passes K, V
  and their gradients (2x). A hop overlaps the attention of the block in hand, and nothing else,
  so only max(0, ring time - attention time) is exposed.
* Expert parallelism (Lepikhin et al. 2020, GShard; Rajbhandari et al. 2022, DeepSpeed-MoE):
  each MoE layer dispatches every token's hidden state to its top-k experts and combines the
  results back, two all-to-alls forward and two backward, of tokens x top-k x capacity x h x
  bytes, of which (ep - 1)/ep leaves the rank under uniform routing. Expert capacity (Fedus et
  al. 2021, Switch Transformer, sec. 2.2): capacity factor x tokens x top-k / experts.
* Asynchrony, depth k (disaggregated pools; one-step off-policy is k = 1): generation of
  step t + k overlaps training on step t; with fixed stage times the steady state is
  max(T_gen, T_rest) for any k >= 1 (a deeper queue only absorbs step-to-step variance, which
  this model has none of), and samples are k policy versions old when generation is the faster
  side (the queue fills), 1 when it is the slower one (the trainer drains it).

    from rlbench.harness.perfmodel.parallelism import pipeline_bubble_fraction
    pipeline_bubble_fraction(pp=8, micro_batches=32)              # 7/39 = 0.179 (1F1B)
    pipeline_bubble_fraction(pp=8, micro_batches=32, virtual=4)   # 7/135
"""

from __future__ import annotations

import math

from rlbench.harness.perfmodel.comm import all_reduce_bytes, all_to_all_bytes


def tp_all_reduce_bytes(tp: int, tokens: float, hidden: int, dtype_bytes: int, *, layers: int, passes: int) -> float:
    """Bytes one GPU sends for TP: 2 all-reduces of tokens x hidden per layer and pass (fwd 1, bwd 1)."""
    return passes * 2 * layers * all_reduce_bytes(tp, tokens * hidden * dtype_bytes)


def pipeline_bubble_fraction(pp: int, micro_batches: int, virtual: int = 1) -> float:
    """Share of a pipelined pass the ranks sit idle: (p - 1) / (v*m + p - 1); 0 without a pipeline."""
    return (pp - 1) / (virtual * micro_batches + pp - 1)


def pipeline_bubble_over_ideal(pp: int, micro_batches: int, virtual: int = 1) -> float:
    """Bubble time / ideal time, Narayanan et al.'s form: (p - 1) / m (1F1B), (p - 1) / (v*m) interleaved."""
    return (pp - 1) / (virtual * micro_batches)


def ring_attention_bytes(
    cp: int,
    tokens: float,
    kv_width: float,
    dtype_bytes: int,
    *,
    layers: int,
    training: bool,
    checkpointing: bool = False,
) -> float:
    """Bytes one GPU sends round the CP ring: (cp - 1) hops of its K and V block per layer.

    tokens: the micro-batch's tokens (all cp ranks together); kv_width: K (= V) width on this rank
    (kv_heads x head_dim / tp). Backward sends K, V and dK, dV (2x); a recomputed forward 1x more."""
    if cp == 1:
        return 0.0
    block = tokens / cp * 2 * kv_width * dtype_bytes
    passes = (1 + 2 + (1 if checkpointing else 0)) if training else 1
    return passes * layers * (cp - 1) * block


def ring_exposed_s(ring_s: float, attention_s: float) -> float:
    """Ring time not hidden under the attention it overlaps (the rest of the layer cannot hide it)."""
    return max(0.0, ring_s - attention_s)


def expert_capacity(tokens: float, experts: int, top_k: int, capacity_factor: float) -> int:
    """Token slots per expert: ceil(capacity factor x tokens x top-k / experts) (Switch Transformer)."""
    return math.ceil(capacity_factor * tokens * top_k / experts)


def ep_dispatch_tokens(tokens: float, experts: int, top_k: int, capacity_factor: float | None) -> float:
    """Token copies one rank sends through dispatch: tokens x top-k dropless, else every expert's
    capacity-padded buffer (experts x capacity, about capacity factor x tokens x top-k)."""
    if capacity_factor is None:
        return tokens * top_k
    return experts * expert_capacity(tokens, experts, top_k, capacity_factor)


def ep_all_to_all_bytes(
    ep: int,
    tokens: float,
    hidden: int,
    dtype_bytes: int,
    *,
    experts: int,
    top_k: int,
    capacity_factor: float | None,
    moe_layers: int,
    passes: int,
) -> float:
    """Bytes one GPU sends for EP: dispatch + combine (2 all-to-alls) per MoE layer and pass.

    tokens: this rank's tokens; (ep - 1)/ep of the buffer leaves the rank under uniform routing."""
    if ep == 1:
        return 0.0
    buffer = ep_dispatch_tokens(tokens, experts, top_k, capacity_factor) * hidden * dtype_bytes
    return passes * moe_layers * 2 * all_to_all_bytes(ep, buffer)


def experts_touched(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a batch of tokens routes to, uniform routing: E(1 - (1 - k/E)^T)."""
    if tokens <= 0:
        return 0.0
    return experts * (1 - (1 - top_k / experts) ** tokens)


def async_step_s(gen_s: float, rest_s: float, depth: int) -> float:
    """Steady-state step time: stages add without asynchrony; max(T_gen, T_rest) at any depth >= 1."""
    return gen_s + rest_s if depth == 0 else max(gen_s, rest_s)


def async_staleness(gen_s: float, rest_s: float, depth: int) -> int:
    """Policy versions between the weights that generated a batch and the ones it trains: 0 on-policy;
    k when generation is faster (the queue fills to its bound), 1 when it is slower (drained at once)."""
    if depth == 0:
        return 0
    return depth if gen_s < rest_s else 1
