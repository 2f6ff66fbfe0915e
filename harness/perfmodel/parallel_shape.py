"""How one RL step is laid out on GPUs (ParallelShape): the trainer's parallelism, the rollout's, placement,
asynchrony and stage fusion. Frozen, and checks itself: a bad value raises ValueError naming the field.

    from rlbench.harness.perfmodel import ParallelShape
    par = ParallelShape(gpus=16, tp=2, rollout_tp=2)                 # dp derived: 8
    split = ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=8, async_mode="one-step")

Trainer rank layout (used to decide which collectives cross nodes): tp innermost, then sp,
then cp, then dp, then pp, as in Megatron-LM (tp-cp-ep-dp-pp). `sp` is Ulysses sequence
parallelism (all-to-all over heads), `cp` ring-attention context parallelism (the sequence split,
K and V passed round a ring); FSDP and the distributed optimizer shard over dp x sp x cp, as
verl's FSDP workers and Megatron-LM's context parallelism do. `ep` (expert parallelism) is
carved out of those dp x sp x cp ranks, not added to them (Megatron-Core: ep divides dp x cp).
`etp` (expert tensor parallelism, Megatron-Core's expert_tensor_parallel_size) splits each expert
over etp of the tp ranks; unset it is tp, Megatron's default. Below tp it is MoE parallel folding:
the MoE layers regroup the same GPUs as etp x ep x expert-dp (etp innermost), so the tp / etp ranks
that split attention hold different experts and ep is carved out of (tp / etp) x dp x sp x cp.
Every knob beyond the first issue's (cp, ep, pp_schedule, pp_virtual, async k-step, fuse) is
neutral at its default, so a layout that does not set them predicts exactly as before;
docs/parallelism.md has the whole taxonomy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rlbench.harness.perfmodel.shapes import (
    ASYNC_MODES,
    FUSIONS,
    PLACEMENTS,
    PP_SCHEDULES,
    SHARDINGS,
    WorkloadShape,
    check_boolean,
    check_choice,
    check_positive,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelShape:
    gpus: int  # all GPUs of the job
    dp: int | None = None  # None: the trainer's GPUs / (tp * pp * sp * cp)
    tp: int = 1
    pp: int = 1
    sp: int = 1
    rollout_tp: int = 1
    placement: Literal["colocated", "disaggregated"] = "colocated"
    rollout_gpus: int = 0  # disaggregated only: GPUs of the rollout pool (the rest train)
    async_mode: Literal["off", "one-step", "k-step"] = "off"
    # Over dp x sp x cp: "full" = FSDP / ZeRO-3 (params, grads, optimizer; gathers every micro-batch),
    # "optimizer" = ZeRO-1 / Megatron distributed optimizer, "none" = plain DDP.
    sharding: Literal["full", "optimizer", "none"] = "full"
    cp: int = 1  # ring-attention context parallel size of the trainer
    ep: int = 1  # expert parallel size of the trainer (MoE); divides (tp / etp) x dp x sp x cp
    etp: int | None = None  # expert tensor parallel size (divides tp); None: tp, Megatron-Core's default
    # None: dropless routing (every token reaches its top-k experts, Megatron's default); a float: the
    # expert capacity factor (Switch Transformer), which pads (or drops) each expert's buffer to it.
    ep_capacity_factor: float | None = None
    pp_schedule: Literal["1f1b", "interleaved"] = "1f1b"
    pp_virtual: int = 1  # interleaved 1F1B: model chunks per pipeline rank (Megatron's virtual stages)
    async_staleness: int = 1  # async_mode="k-step": samples may be up to k policy versions old
    fuse: tuple[str, ...] = ()  # FUSIONS applied (stage fusion)
    # Partial (streaming) rollout on an asynchronous rollout pool: each engine refills the slots of finished
    # samples with the next prompts and the trainer takes a batch once it is complete, so no engine idles
    # on one batch's stragglers (AReaL's asynchronous rollout, verl's fully-async trainer, slime's partial
    # rollout). Decode then takes the batch's tokens / the engine's slots in steps, not its longest response.
    partial_rollout: bool = False

    def __post_init__(self) -> None:
        own = "ParallelShape"
        for field in ("gpus", "tp", "pp", "sp", "rollout_tp", "cp", "ep", "pp_virtual", "async_staleness"):
            check_positive(own, field, getattr(self, field))
        check_choice(own, "placement", self.placement, PLACEMENTS)
        check_choice(own, "async_mode", self.async_mode, ASYNC_MODES)
        check_choice(own, "sharding", self.sharding, SHARDINGS)
        check_choice(own, "pp_schedule", self.pp_schedule, PP_SCHEDULES)
        self._check_new_knobs(own)
        check_positive(own, "rollout_gpus", self.rollout_gpus, minimum=0)
        if self.placement == "colocated" and self.rollout_gpus not in (0, self.gpus):
            raise ValueError(
                f"{own}.rollout_gpus={self.rollout_gpus}: colocated rollout uses all "
                f"{self.gpus} GPUs; leave it 0 or use placement='disaggregated'"
            )
        if self.placement == "disaggregated" and not 1 <= self.rollout_gpus < self.gpus:
            raise ValueError(
                f"{own}.rollout_gpus={self.rollout_gpus}: disaggregated needs 1..{self.gpus - 1} "
                f"rollout GPUs, leaving the rest of the {self.gpus} to train"
            )
        model = self.tp * self.pp * self.sp * self.cp
        names = "tp*pp*sp" + ("*cp" if self.cp > 1 else "")
        if self.trainer_gpus % model:
            raise ValueError(f"{own}.tp: {names} = {model} must divide the trainer's {self.trainer_gpus} GPUs")
        if self.dp is not None:
            check_positive(own, "dp", self.dp)
            if self.dp * model != self.trainer_gpus:
                raise ValueError(
                    f"{own}.dp={self.dp}: dp*{names} = {self.dp * model} must equal "
                    f"the trainer's {self.trainer_gpus} GPUs"
                )
        if self.rollout_pool_gpus % self.rollout_tp:
            raise ValueError(
                f"{own}.rollout_tp={self.rollout_tp}: must divide the rollout pool's {self.rollout_pool_gpus} GPUs"
            )
        if self.etp is not None:
            check_positive(own, "etp", self.etp)
            if self.tp % self.etp:
                raise ValueError(
                    f"{own}.etp={self.etp}: must divide tp={self.tp} (each expert is split over etp of the tp ranks)"
                )
        if self.expert_pool % self.ep:
            pool = "dp*sp*cp" if self.expert_tp == self.tp else "(tp/etp)*dp*sp*cp"
            fold = "; etp=1 folds the tp ranks in" if self.expert_tp == self.tp > 1 else ""
            raise ValueError(
                f"{own}.ep={self.ep}: must divide {pool} = {self.expert_pool} (expert parallel "
                f"ranks are data-parallel ranks that split the experts, as in Megatron-Core{fold})"
            )

    def _check_new_knobs(self, own: str) -> None:
        if self.pp_schedule == "1f1b" and self.pp_virtual != 1:
            raise ValueError(f"{own}.pp_virtual={self.pp_virtual}: virtual stages need pp_schedule='interleaved'")
        if self.pp_schedule == "interleaved" and (self.pp < 2 or self.pp_virtual < 2):
            raise ValueError(
                f"{own}.pp_schedule='interleaved': needs pp >= 2 and pp_virtual >= 2 "
                f"(got pp={self.pp}, pp_virtual={self.pp_virtual})"
            )
        if self.async_mode != "k-step" and self.async_staleness != 1:
            raise ValueError(f"{own}.async_staleness={self.async_staleness}: only with async_mode='k-step'")
        check_boolean(own, "partial_rollout", self.partial_rollout)
        if self.partial_rollout and (self.placement != "disaggregated" or self.async_mode == "off"):
            raise ValueError(
                f"{own}.partial_rollout: needs placement='disaggregated' and async_mode one-step or k-step "
                "(a rollout pool of its own that runs ahead of the trainer)"
            )
        if self.ep_capacity_factor is not None and (
            isinstance(self.ep_capacity_factor, bool)
            or not isinstance(self.ep_capacity_factor, (int, float))
            or self.ep_capacity_factor <= 0
        ):
            raise ValueError(
                f"{own}.ep_capacity_factor={self.ep_capacity_factor!r}: must be a positive number or None (dropless)"
            )
        if (
            not isinstance(self.fuse, tuple)
            or any(f not in FUSIONS for f in self.fuse)
            or len(set(self.fuse)) != len(self.fuse)
        ):
            raise ValueError(f"{own}.fuse={self.fuse!r}: must be a tuple of distinct names from {', '.join(FUSIONS)}")
        if {"rollout_logprobs", "on_policy_old"} <= set(self.fuse):
            raise ValueError(
                f"{own}.fuse: 'rollout_logprobs' and 'on_policy_old' both remove the old-log-prob pass; give one"
            )
        if "ref_old" in self.fuse and set(self.fuse) & {"rollout_logprobs", "on_policy_old"}:
            raise ValueError(
                f"{own}.fuse: 'ref_old' merges the old-log-prob pass that "
                f"{'/'.join(sorted(set(self.fuse) - {'ref_old'}))} removes; give one"
            )

    @property
    def async_depth(self) -> int:
        """Generation batches ahead of the trainer: 0 (off), 1 (one-step) or k (k-step)."""
        return {"off": 0, "one-step": 1}.get(self.async_mode, self.async_staleness)

    @property
    def batches_in_flight(self) -> int:
        """Generation batches an engine decodes at once: k for k-step async on a rollout pool of its own
        (the engine keeps generating while batches wait their turn, so one batch's straggler tail overlaps
        the next batches), else 1 (one-step-off generates one batch ahead, one batch at a time)."""
        disaggregated = self.placement == "disaggregated"
        return self.async_staleness if disaggregated and self.async_mode == "k-step" else 1

    def decode_depth(self, shape: WorkloadShape) -> int:
        """Decode steps of one RL step's generation before any engine limit: the longest response of the whole
        batch (the expected longest under a length distribution), over the batches decoded at once. The
        whole batch's, not one engine's: the step waits for its slowest engine, so more engines with fewer
        sequences each do not shorten it. With partial rollout the mean: slots refill as samples finish."""
        k = self.batches_in_flight
        if self.partial_rollout:
            return math.ceil(shape.mean_response / k)
        return math.ceil(shape.longest_response(shape.sequences * k) / k)

    @property
    def trainer_gpus(self) -> int:
        return self.gpus if self.placement == "colocated" else self.gpus - self.rollout_gpus

    @property
    def rollout_pool_gpus(self) -> int:
        return self.gpus if self.placement == "colocated" else self.rollout_gpus

    @property
    def data_parallel(self) -> int:
        """dp as given, or derived from the trainer's GPUs."""
        return self.dp if self.dp is not None else self.trainer_gpus // (self.tp * self.pp * self.sp * self.cp)

    @property
    def rollout_replicas(self) -> int:
        """Independent inference engines (each rollout_tp GPUs wide)."""
        return self.rollout_pool_gpus // self.rollout_tp

    @property
    def dp_group(self) -> int:
        """Ranks holding the same (non-expert) model shard: dp x sp x cp."""
        return self.data_parallel * self.sp * self.cp

    @property
    def splits_experts(self) -> bool:
        """Whether the routed experts are laid out apart from the dense part (ep > 1 or etp below tp)."""
        return self.ep > 1 or self.expert_tp != self.tp

    @property
    def expert_tp(self) -> int:
        """Ranks one expert's weights are split over: etp, or tp when unset."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_pool(self) -> int:
        """Ranks expert parallelism is carved out of: (tp / etp) x dp x sp x cp."""
        return self.tp // self.expert_tp * self.dp_group

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same expert shard (Megatron-Core's expert data parallel group)."""
        return self.expert_pool // self.ep

    @property
    def expert_stride(self) -> int:
        """Rank stride of an ep group: after tp, sp and cp (tp-cp-ep-dp-pp); with etp < tp after etp
        alone (the MoE layers' own etp-ep-edp grid)."""
        return self.tp * self.sp * self.cp if self.expert_tp == self.tp else self.expert_tp

    @property
    def pp_slots(self) -> float:
        """Pipeline fill and drain, in micro-batch slots of one stage: p - 1 (1F1B), (p - 1) / v (interleaved)."""
        return self.pp - 1 if self.pp_virtual == 1 else (self.pp - 1) / self.pp_virtual

    @property
    def param_shards(self) -> int:
        """Ranks parameters and gradients are sharded over (sharding='full' only)."""
        return self.dp_group if self.sharding == "full" else 1

    @property
    def optimizer_shards(self) -> int:
        """Ranks the fp32 master weights and Adam moments are sharded over."""
        return self.dp_group if self.sharding != "none" else 1
