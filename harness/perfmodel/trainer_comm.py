"""Collectives of one trainer pass (forward, or forward + backward) under the trainer's layout.

Data parallel (sharding over dp x sp x cp): FSDP all-gathers the shard every forward and again
for backward and reduce-scatters gradients per micro-batch; the distributed optimizer
reduce-scatters and all-gathers once per optimizer step; DDP all-reduces once per step. With
expert parallelism the routed experts are a separate group: ep ranks split them, and the
remaining (tp / etp) x dp x sp x cp / ep ranks (Megatron-Core's expert data parallel group) shard
and reduce them, while the dense part keeps the whole dp x sp x cp group.

Model parallel, per micro-batch (parallelism.py has each formula and its source): TP 2
all-reduces per layer and pass; Ulysses SP 4 all-to-alls per layer and pass; CP ring K/V
exchange per layer; EP dispatch + combine all-to-alls per MoE layer and pass; PP activations
to the next stage forward and gradients back, v times more with v interleaved chunks.
"Pass" counts the forward-equivalents that talk: 1 forward, 2 for forward + backward, 3 with
a recomputed forward.

    from rlbench.harness.perfmodel.trainer_comm import trainer_comm
"""

from __future__ import annotations

import math

from rlbench.harness.perfmodel import flops as fl
from rlbench.harness.perfmodel.arch import ModelArch
from rlbench.harness.perfmodel.comm import (
    Collective,
    all_gather_bytes,
    all_reduce_bytes,
    all_to_all_bytes,
    link_bandwidth,
    merge,
    ring_bandwidth,
)
from rlbench.harness.perfmodel.hardware import Hardware
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.parallelism import (
    ep_all_to_all_bytes,
    ring_attention_bytes,
    ring_exposed_s,
    tp_all_reduce_bytes,
)
from rlbench.harness.perfmodel.shapes import WorkloadShape


def experts_apart(arch: ModelArch, par: ParallelShape) -> bool:
    """Whether the model has routed experts and the layout splits them apart from the dense part
    (ParallelShape.splits_experts: ep > 1 or etp below tp)."""
    return arch.is_moe and par.splits_experts


def local_params(arch: ModelArch, par: ParallelShape, params: int) -> float | None:
    """Parameters of one rank's model-parallel shard before data-parallel sharding, when the experts are
    laid out apart (experts_apart): dense / (tp x pp) + experts / (etp x pp x ep). None otherwise (the
    caller keeps its own params / (tp x pp), bit for bit as before)."""
    if not experts_apart(arch, par):
        return None
    experts = arch.expert_params()
    return (params - experts) / (par.tp * par.pp) + experts / (par.expert_tp * par.pp * par.ep)


def _dp_groups(arch: ModelArch, par: ParallelShape, params: int, dtype: int) -> list[tuple[int, float, int]]:
    """(ranks, shard bytes, rank stride) of each data-parallel group a shard is reduced over."""
    mp = par.tp * par.pp
    if not experts_apart(arch, par):
        return [(par.dp_group, params * dtype / mp, par.tp)]
    experts = arch.expert_params()
    return [
        (par.dp_group, (params - experts) * dtype / mp, par.tp),
        (par.expert_dp, experts * dtype / (par.expert_tp * par.pp * par.ep), par.expert_tp * par.ep),
    ]


def _data_parallel(
    par: ParallelShape,
    hw: Hardware,
    groups: list[tuple[int, float, int]],
    *,
    micro_batches: int,
    optimizer_steps: int,
    training: bool,
) -> list[Collective]:
    out: list[Collective] = []
    for ranks, shard, stride in groups:
        if ranks < 2:
            continue
        link = ring_bandwidth(hw, ranks, stride)
        if par.sharding == "full":
            gather = all_gather_bytes(ranks, shard)
            out.append(
                Collective(
                    kind="fsdp_all_gather",
                    bytes_per_gpu=micro_batches * gather * (2 if training else 1),
                    bandwidth=link,
                )
            )
            if training:
                out.append(Collective(kind="fsdp_reduce_scatter", bytes_per_gpu=micro_batches * gather, bandwidth=link))
        elif training and par.sharding == "optimizer":
            once = optimizer_steps * all_gather_bytes(ranks, shard)
            out.append(Collective(kind="dp_reduce_scatter", bytes_per_gpu=once, bandwidth=link))
            out.append(Collective(kind="dp_all_gather", bytes_per_gpu=once, bandwidth=link))
        elif training:
            out.append(
                Collective(
                    kind="dp_all_reduce", bandwidth=link, bytes_per_gpu=optimizer_steps * all_reduce_bytes(ranks, shard)
                )
            )
    return out


def _kv_width(arch: ModelArch, tp: int) -> float:
    """K (= V) width on one TP rank: its KV heads x head_dim (a KV head is copied when tp > kv_heads)."""
    return math.ceil(arch.kv_heads / tp) * arch.head_dim  # type: ignore[operator]


def trainer_comm(
    arch: ModelArch,
    shape: WorkloadShape,
    par: ParallelShape,
    hw: Hardware,
    *,
    params: int,
    micro_batches: int,
    micro_tokens: float,
    optimizer_steps: int,
    training: bool,
) -> tuple[Collective, ...]:
    """Per-GPU bytes of every collective of a trainer pass over `micro_batches` micro-batches of
    `micro_tokens` tokens (one data-parallel rank's, before sp/cp split them)."""
    tp, pp, sp, cp, dp, dtype = par.tp, par.pp, par.sp, par.cp, par.data_parallel, shape.dtype_bytes
    layers = math.ceil(arch.layers / pp)
    passes = (2 + (1 if shape.gradient_checkpointing else 0)) if training else 1  # fwd-equivalents that talk
    act = micro_tokens / (sp * cp) * arch.hidden * dtype  # one micro-batch's activations on one GPU
    out = _data_parallel(
        par,
        hw,
        _dp_groups(arch, par, params, dtype),
        micro_batches=micro_batches,
        optimizer_steps=optimizer_steps,
        training=training,
    )
    if tp > 1:
        out.append(
            Collective(
                kind="tp_all_reduce",
                bandwidth=ring_bandwidth(hw, tp, 1),
                bytes_per_gpu=tp_all_reduce_bytes(
                    tp, micro_tokens / (sp * cp), arch.hidden, dtype, layers=layers, passes=micro_batches * passes
                ),
            )
        )
    if sp > 1:
        out.append(
            Collective(
                kind="sp_all_to_all",
                bandwidth=link_bandwidth(hw, sp, tp),
                bytes_per_gpu=micro_batches * passes * 4 * layers * all_to_all_bytes(sp, act),
            )
        )
    if cp > 1:
        ring = ring_attention_bytes(
            cp,
            micro_tokens / sp,
            _kv_width(arch, tp),
            dtype,
            layers=layers,
            training=training,
            checkpointing=shape.gradient_checkpointing,
        )
        out.append(
            Collective(kind="cp_ring_kv", bandwidth=link_bandwidth(hw, cp, tp * sp), bytes_per_gpu=micro_batches * ring)
        )
    if par.ep > 1 and arch.is_moe:
        # Megatron's MoE with tp > 1 runs sequence-parallel: each TP rank dispatches its 1/tp of the tokens.
        tokens = micro_tokens / (sp * cp * tp)
        out.append(
            Collective(
                kind="ep_all_to_all",
                bandwidth=link_bandwidth(hw, par.ep, par.expert_stride),
                bytes_per_gpu=ep_all_to_all_bytes(
                    par.ep,
                    tokens,
                    arch.hidden,
                    dtype,
                    experts=arch.moe_experts,
                    top_k=arch.moe_top_k,
                    capacity_factor=par.ep_capacity_factor,
                    moe_layers=layers,
                    passes=micro_batches * passes,
                ),
            )
        )
    if pp > 1:
        sends = micro_batches * (2 if training else 1) * act / tp
        out.append(
            Collective(
                kind="pp_send",
                bandwidth=link_bandwidth(hw, pp, tp * sp * cp * dp),
                bytes_per_gpu=sends * par.pp_virtual if par.pp_virtual > 1 else sends,
            )
        )
    return merge(out)


def ring_exposure_s(
    arch: ModelArch,
    shape: WorkloadShape,
    par: ParallelShape,
    hw: Hardware,
    comm: tuple[Collective, ...],
    *,
    sequences: float,
    training: bool,
    achievable: float,
    compute_fraction: float = 1.0,
) -> float:
    """Seconds of the CP ring one GPU cannot hide under its own attention compute (0 without cp).

    sequences: sequences this rank's pass runs (cp ranks share each); links run at `achievable` of
    their bandwidth, compute at achievable x compute_fraction of peak (roofline._times)."""
    ring = next((c for c in comm if c.kind == "cp_ring_kv"), None)
    if ring is None or not ring.bandwidth:
        return 0.0
    passes = fl.passes(shape.gradient_checkpointing) if training else 1
    s = shape.computed_seq_len
    attention = 4 * arch.layers * arch.attn_dim * s * (s + 1) / 2  # causal attention of one sequence, forward
    per_gpu = sequences * passes * attention / (par.tp * par.pp * par.sp * par.cp)
    return ring_exposed_s(
        ring.bytes_per_gpu / (ring.bandwidth * achievable), per_gpu / (hw.bf16_flops * achievable * compute_fraction)
    )
