"""The ten stages of one RL step and their costs on the trainer (and rollout) GPUs.

    generation_prefill, generation_decode        rollout pool (rollout.py)
    reward                                       rule reward: CPU, not modelled (0); or a reward model
    ref_logprob, old_logprob, critic_values      forward passes on the trainer
    advantage                                    O(tokens) elementwise (GAE scan or group normalisation)
    actor_update, critic_update                  forward + backward + Adam, ppo_epochs x mini-batches
    weight_sync                                  trainer -> rollout weights

Trainer passes, per GPU (tp x pp model shards; ParallelShape.sharding over dp x sp):
* FLOPs: forward 2N + 4LAt per token (flops.py); training 3x, 4x with checkpointing. A
  left-padded batch (WorkloadShape.padded_prompt_len) computes on every padded position; its
  model FLOPs (MFU) count the real tokens only.
* HBM: the weight shard is read once per pass per micro-batch (+1 write of gradients when
  training); Adam reads and writes 28 bytes per local parameter per optimizer step (bf16
  grad + fp32 master, m, v read; fp32 master, m, v + bf16 param written).
* Communication: FSDP (sharding="full") all-gathers parameters for every forward and again
  for backward, and reduce-scatters gradients, per micro-batch: 3(n-1)/n x model bytes for
  training, (n-1)/n for a forward. A distributed optimizer (sharding="optimizer")
  reduce-scatters gradients and all-gathers parameters once per optimizer step, and plain
  DDP all-reduces gradients once per step: 2(n-1)/n either way. TP: 2 all-reduces per layer forward,
  2 backward (and 2 more
  for a recomputed forward). Ulysses SP: 4 all-to-alls per layer and pass. Ring CP: K/V round
  the ring, exposed only where it outlasts the attention it overlaps. EP: dispatch + combine
  all-to-alls per MoE layer and pass. PP: activations to the next stage forward, gradients
  back (v times more interleaved). trainer_comm.py builds them, parallelism.py has the formulas.
* Depth: m micro-batches per mini-batch in sequence, each a pass of L/pp layers + 2
  units (roofline.pass_units), x3 for training (a backward counts 2 units, as its FLOPs do;
  x4 with checkpointing); a pipeline adds pp - 1 micro-batch slots per mini-batch (the 1F1B
  bubble), (pp - 1) / v with the interleaved schedule.
* Stage fusion (ParallelShape.fuse): the old-log-prob pass removed (rollout_logprobs,
  on_policy_old) or run with the reference in one pass (ref_old), see _logprob_passes.

    from rlbench.harness.perfmodel.stages import build_stages
    for stage in build_stages(arch, shape, parallel, hw, achievable=1.0):
        print(stage.name, stage.time_s)
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

from rlbench.harness.perfmodel import flops as fl
from rlbench.harness.perfmodel.arch import ModelArch
from rlbench.harness.perfmodel.comm import Collective, all_gather_bytes, merge, ring_bandwidth
from rlbench.harness.perfmodel.hardware import Hardware
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.rollout import decode_stage, prefill_stage
from rlbench.harness.perfmodel.roofline import StageCost, Work, build_stage, empty_stage, pass_units
from rlbench.harness.perfmodel.shapes import WorkloadShape
from rlbench.harness.perfmodel.trainer_comm import experts_apart, local_params, ring_exposure_s, trainer_comm

ADAM_BYTES_PER_PARAM = 28


def critic_params(arch: ModelArch) -> int:
    """The actor's parameters with the LM head swapped for a hidden x 1 value head (+ bias)."""
    head = 0 if arch.tied_embeddings else arch.vocab * arch.hidden
    return arch.param_count().total - head + arch.hidden + 1


def trainer_pass(
    name: str,
    arch: ModelArch,
    shape: WorkloadShape,
    par: ParallelShape,
    hw: Hardware,
    *,
    achievable: float,
    training: bool,
    value_head: bool,
    params: int | None = None,
    compute_fraction: float = 1.0,
    models: int = 1,
    host: Literal["gpu", "streamed", "swapped"] = "gpu",
) -> StageCost:
    """A forward (log-probs, values, reward model) or a full update over the step's sequences.

    models: forwards of that many same-shaped models fused into one pass over the same micro-batches
    (fuse='ref_old'): work scales by it, the pipeline fills and drains once.
    host: where the model's parameter shards live between uses (WorkloadShape.ref_offload, .offload):
    "gpu"; "streamed" from host memory for every micro-batch, overlapping compute; "swapped" in before
    the stage and out after it (with the Adam states for an update), before and after the compute."""
    tp, pp, sp, cp, dp, gpus = par.tp, par.pp, par.sp, par.cp, par.data_parallel, par.trainer_gpus
    params = params if params is not None else arch.param_count().total
    local = local_params(arch, par, params)  # one model-parallel shard (experts split by ep), before FSDP
    shard_bytes = params * shape.dtype_bytes / (tp * pp) if local is None else local * shape.dtype_bytes
    epochs, minis = (shape.ppo_epochs, shape.mini_batches) if training else (1, 1)
    per_rank = math.ceil(shape.sequences / minis / dp)
    micro = shape.micro_batches(per_rank)
    n_micro, steps = epochs * minis * micro * models, epochs * minis
    passes = fl.passes(shape.gradient_checkpointing) if training else 1
    # A left-padded batch computes on its pads too: hardware FLOPs, not model FLOPs (MFU's numerator).
    seq = fl.sequence_forward_flops(arch, shape.computed_seq_len, value_head=value_head)
    useful = fl.sequence_forward_flops(arch, shape.mean_seq_len, value_head=value_head)
    flops = epochs * shape.sequences * passes * seq * models
    model_flops = epochs * shape.sequences * (3 if training else 1) * useful * models
    mb_bytes = n_micro * (passes + (1 if training else 0)) * shard_bytes
    opt_bytes = 0.0
    if training:
        opt_bytes = (
            steps
            * ADAM_BYTES_PER_PARAM
            * (params / (tp * pp * par.optimizer_shards) if local is None else local / par.optimizer_shards)
        )
    micro_tokens = per_rank * shape.computed_seq_len / micro
    comm = trainer_comm(
        arch,
        shape,
        par,
        hw,
        params=params,
        micro_batches=n_micro,
        micro_tokens=micro_tokens,
        optimizer_steps=steps,
        training=training,
    )
    # 1F1B idles pp - 1 micro-batch slots per mini-batch, interleaved (pp - 1) / v (parallelism.py)
    slots = micro * models + par.pp_slots
    bubble = slots / (micro * models)
    critical_flops = epochs * minis * per_rank * passes * seq * models / (tp * pp * sp * cp) * bubble
    exposed = ring_exposure_s(
        arch,
        shape,
        par,
        hw,
        comm,
        sequences=epochs * minis * per_rank * models,
        training=training,
        achievable=achievable,
        compute_fraction=compute_fraction,
    )
    offload_note = ""
    if host != "gpu" and hw.host_link_bytes_per_s:
        model_shard = params / (tp * pp) if local is None else local
        comm, swap_s, offload_note = _host_offload(
            host,
            model_shard / par.param_shards,
            model_shard / par.optimizer_shards if training else 0.0,
            shape.dtype_bytes,
            n_micro,
            comm,
            hw,
            achievable,
        )
        exposed += swap_s
    critical = Work(flops=critical_flops, bytes=mb_bytes * bubble + opt_bytes, comm=comm, exposed_s=exposed)
    note = f"{n_micro} micro-batches per GPU" + (f", pipeline bubble x{bubble:.2f}" if pp > 1 else "") + offload_note
    if par.pp_schedule == "interleaved":
        note += f" (interleaved, {par.pp_virtual} chunks per rank)"
    if models > 1:
        note += f", {models} models' forwards fused in one pass"
    return build_stage(
        name,
        hw=hw,
        achievable=achievable,
        compute_fraction=compute_fraction,
        gpus=gpus,
        flops=flops,
        model_flops=model_flops,
        bytes=gpus * (mb_bytes + opt_bytes),
        comm=comm,
        critical=critical,
        note=note,
        matmul_rows=micro_tokens / (sp * cp),
        matmul_dim=arch.hidden / tp,
        training=training,
        depth=steps * slots * passes * pass_units(math.ceil(arch.layers / pp)),
    )


# verl's actor and critic keep fp32 parameters in their FSDP shards (mixed precision computes in bf16), so
# a swapped shard moves 4 bytes a parameter, and Adam's m and v 8 more; a streamed reference model keeps the
# workload's dtype.
SWAPPED_PARAM_BYTES = 4
SWAPPED_ADAM_BYTES = 8


def _host_offload(
    host: str,
    params: float,
    adam_params: float,
    dtype_bytes: int,
    n_micro: int,
    comm: tuple[Collective, ...],
    hw: Hardware,
    achievable: float,
) -> tuple[tuple[Collective, ...], float, str]:
    """(comm, serial seconds, note) of CPU offload over the host link, for a GPU's shard of `params`
    parameters (and, for an update, `adam_params` parameters' Adam moments).

    streamed: one host-to-device copy of the shard per micro-batch, a transfer that overlaps compute as
    FSDP's prefetched gathers do. swapped: the fp32 shard and the Adam moments copied in and back out
    once, serial to the compute."""
    link = hw.host_link_bytes_per_s
    if host == "streamed":
        moved = n_micro * params * dtype_bytes
        streamed = Collective(kind="host_offload", bytes_per_gpu=moved, bandwidth=link)
        return merge([*comm, streamed]), 0.0, f", parameters streamed from host memory ({moved / 1e9:.2f} GB/GPU)"
    moved = 2 * (params * SWAPPED_PARAM_BYTES + adam_params * SWAPPED_ADAM_BYTES)  # in, then out
    note = f", parameters swapped in and out of host memory ({moved / 1e9:.2f} GB/GPU)"
    return comm, moved / (link * achievable), note


def advantage_stage(shape: WorkloadShape, par: ParallelShape, hw: Hardware, *, achievable: float) -> StageCost:
    """GAE: ~5 FLOPs and 16 bytes (reward, value, advantage, return in fp32) per response token, a
    reverse scan of depth R; GRPO: group normalisation, ~2 FLOPs and 8 bytes per token, depth 1.

    A scan step is a few elementwise kernels, fewer than a layer's, so R units over-count its
    latency: an upper estimate where op_latency_s is known."""
    tokens = shape.sequences * shape.mean_response
    per_flop, per_byte, depth = (5, 16, shape.response_len) if shape.has_critic else (2, 8, 1)
    gpus = par.trainer_gpus
    return build_stage(
        "advantage",
        hw=hw,
        achievable=achievable,
        gpus=gpus,
        flops=per_flop * tokens,
        bytes=per_byte * tokens,
        comm=(),
        depth=depth,
        critical=Work(flops=per_flop * tokens / gpus, bytes=per_byte * tokens / gpus),
        note="elementwise; verl computes it on the driver, negligible either way",
    )


def weight_sync_stage(arch: ModelArch, par: ParallelShape, hw: Hardware, *, achievable: float) -> StageCost:
    """Gather the trainer's shards, then load bf16 weights into the engines.

    Colocated: an in-GPU reshard (hybrid engine). Disaggregated: each rollout GPU receives its
    weights / rollout_tp over its own link (across nodes when the job spans nodes), the lower
    bound of model bytes / link bandwidth when every GPU has a NIC.
    """
    weights = arch.weight_bytes()
    shard_bytes = weights / (par.tp * par.pp)
    comm: list[Collective] = []
    # the experts of one etp x pp shard, before ep splits them
    experts = arch.expert_params() * 2 / (par.expert_tp * par.pp) if experts_apart(arch, par) else 0.0
    if par.param_shards > 1 and experts:  # dense part over dp x sp x cp, experts over the expert dp group
        groups = (
            (par.param_shards, shard_bytes - arch.expert_params() * 2 / (par.tp * par.pp), par.tp),
            (par.expert_dp, experts / par.ep, par.expert_tp * par.ep),
        )
        comm += [
            Collective(
                kind="fsdp_all_gather", bytes_per_gpu=all_gather_bytes(n, size), bandwidth=ring_bandwidth(hw, n, stride)
            )
            for n, size, stride in groups
            if n > 1
        ]
    elif par.param_shards > 1:
        comm.append(
            Collective(
                kind="fsdp_all_gather",
                bytes_per_gpu=all_gather_bytes(par.param_shards, shard_bytes),
                bandwidth=ring_bandwidth(hw, par.param_shards, par.tp),
            )
        )
    if experts:  # the rollout holds every expert: gather them from the ep ranks that split them
        comm.append(
            Collective(
                kind="ep_all_gather",
                bytes_per_gpu=all_gather_bytes(par.ep, experts),
                bandwidth=ring_bandwidth(hw, par.ep, par.expert_stride),
            )
        )
    received = weights / par.rollout_tp
    if par.placement == "disaggregated":
        link = hw.inter_node_bytes_per_s if par.gpus > hw.gpus_per_node else hw.intra_node_bytes_per_s
        comm.append(Collective(kind="weight_transfer", bytes_per_gpu=received, bandwidth=link))
    merged = merge(comm)
    nbytes = 2 * received * par.rollout_pool_gpus  # write into the engine, read from the source
    return build_stage(
        "weight_sync",
        hw=hw,
        achievable=achievable,
        gpus=par.gpus,
        flops=0.0,
        bytes=nbytes,
        comm=merged,
        depth=1,
        critical=Work(flops=0.0, bytes=2 * received, comm=merged),
        note="in-GPU reshard" if par.placement == "colocated" else "trainer -> rollout over links",
    )


def build_stages(
    arch: ModelArch,
    shape: WorkloadShape,
    par: ParallelShape,
    hw: Hardware,
    *,
    achievable: float = 1.0,
    trainer_compute_fraction: float = 1.0,
    trainer_hw: Hardware | None = None,
) -> list[StageCost]:
    """All ten stages of one step, in execution order; stages a step skips cost zero.

    trainer_compute_fraction scales the trainer passes' compute rate alone (the estimate's trainer
    MFU, overheads.py); the bound leaves it at 1.0. trainer_hw, where given, prices the trainer passes
    (every trainer_pass) in place of hw: the estimate's row with the trainer's own per-unit host cost."""
    kw = {"achievable": achievable}
    passes_hw = trainer_hw or hw
    critic = critic_params(arch)
    # a trainer that pads while the engine pages (verl: use_remove_padding false) computes its passes at the
    # padded width, and a critic that pads while the actor packs (critic.model.use_remove_padding false) its
    # own; generation keeps the workload's shape
    rollout_shape = shape
    if shape.trainer_padded_prompt_len is not None:
        shape = replace(shape, padded_prompt_len=shape.trainer_padded_prompt_len)
    critic_shape = (
        replace(shape, padded_prompt_len=shape.critic_padded_prompt_len)
        if shape.critic_padded_prompt_len is not None
        else shape
    )

    # where each model's parameters live between uses (trainer_pass's `host`): the reference model streamed
    # from host memory (ref_offload), the actor and critic swapped in and out around their stages (offload) or
    # around their updates alone (update_offload)
    ref_host = "streamed" if shape.ref_offload else "gpu"
    own_host = "swapped" if shape.offload else "gpu"
    update_host = "swapped" if shape.offload or shape.update_offload else "gpu"

    def forward(
        name: str, value_head: bool = False, params: int | None = None, models: int = 1, on: WorkloadShape = shape
    ) -> StageCost:
        return trainer_pass(
            name,
            arch,
            on,
            par,
            passes_hw,
            training=False,
            value_head=value_head,
            params=params,
            compute_fraction=trainer_compute_fraction,
            models=models,
            host={"ref_logprob": ref_host, "reward": "gpu"}.get(name, own_host),
            **kw,
        )

    def update(name: str, value_head: bool, params: int | None = None, on: WorkloadShape = shape) -> StageCost:
        return trainer_pass(
            name,
            arch,
            on,
            par,
            passes_hw,
            training=True,
            value_head=value_head,
            params=params,
            compute_fraction=trainer_compute_fraction,
            host=update_host,
            **kw,
        )

    ref, old = _logprob_passes(shape, par, forward)
    return [
        prefill_stage(arch, rollout_shape, par, hw, **kw),
        decode_stage(arch, rollout_shape, par, hw, **kw),
        forward("reward", True, critic)
        if shape.reward_model
        else empty_stage("reward", note="rule-based reward on CPU: not modelled"),
        ref,
        old,
        forward("critic_values", True, critic, on=critic_shape)
        if shape.has_critic
        else empty_stage("critic_values", note="no critic"),
        advantage_stage(shape, par, hw, **kw),
        update("actor_update", False),
        update("critic_update", True, critic, on=critic_shape)
        if shape.has_critic
        else empty_stage("critic_update", note="no critic"),
        weight_sync_stage(arch, par, hw, **kw),
    ]


def _logprob_passes(shape: WorkloadShape, par: ParallelShape, forward) -> tuple[StageCost, StageCost]:
    """The reference and old-log-prob stages after stage fusion (ParallelShape.fuse, shapes.FUSIONS).

    ref_old: one pass runs both models' forwards over the same micro-batches (its cost sits on
    ref_logprob; old_logprob is empty). rollout_logprobs / on_policy_old: the old-log-prob pass is gone,
    its log-probs taken from the engine or from the update's own forward."""
    fuse = set(par.fuse)
    ref = forward("ref_logprob") if shape.use_kl_reference else empty_stage("ref_logprob", note="no KL reference")
    if not shape.recompute_old_logprob:
        return ref, empty_stage("old_logprob", note="old log-probs taken from the rollout")
    if "rollout_logprobs" in fuse:
        return ref, empty_stage(
            "old_logprob", note="fused away: generation-time log-probs reused (fuse=rollout_logprobs)"
        )
    if "on_policy_old" in fuse:
        if shape.optimizer_steps != 1:
            raise ValueError(
                f"ParallelShape.fuse='on_policy_old': needs one optimizer step per batch (ppo_epochs=1, "
                f"one mini-batch), not {shape.optimizer_steps}; pi_old differs from the policy after "
                "the first step"
            )
        return ref, empty_stage(
            "old_logprob", note="fused away: pi_old is the update's own forward (fuse=on_policy_old)"
        )
    if "ref_old" in fuse:
        if not shape.use_kl_reference:
            raise ValueError("ParallelShape.fuse='ref_old': the workload has no KL reference pass to fuse with")
        return forward("ref_logprob", models=2), empty_stage(
            "old_logprob", note="fused into ref_logprob (fuse=ref_old)"
        )
    return ref, forward("old_logprob")
