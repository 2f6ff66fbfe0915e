"""What one RL step does (WorkloadShape), and the vocabularies and checks it shares with how the step is laid out
on GPUs (ParallelShape, parallel_shape.py).

Both are frozen and check themselves: a bad value raises ValueError naming the field.

    from rlbench.harness.perfmodel import WorkloadShape, ParallelShape
    work = WorkloadShape(prompts_per_step=64, group_size=8, prompt_len=256, response_len=1024)
    par = ParallelShape(gpus=16, tp=2, rollout_tp=2)                 # dp derived: 8
    split = ParallelShape(gpus=16, placement="disaggregated", rollout_gpus=8, async_mode="one-step")
    moe = ParallelShape(gpus=16, tp=2, pp=2, pp_schedule="interleaved", pp_virtual=2, cp=2, ep=2,
                        sharding="optimizer", fuse=("rollout_logprobs",))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rlbench.harness.perfmodel.lengths import ResponseLengths

ALGORITHMS = ("grpo", "ppo")
PLACEMENTS = ("colocated", "disaggregated")
ASYNC_MODES = ("off", "one-step", "k-step")
PP_SCHEDULES = ("1f1b", "interleaved")
# Stage fusion (stages.py): which trainer passes a step removes or merges.
#   ref_old          the reference and old-log-prob forwards run as one pass over the same micro-batches
#                    (one pipeline fill instead of two; FLOPs and weight reads unchanged)
#   rollout_logprobs old log-probs come from the rollout engine (generation-time log-probs reused):
#                    the old-log-prob pass is removed
#   on_policy_old    one epoch of one mini-batch: pi_old is the update's own (detached) forward, so the
#                    old-log-prob pass is removed (TRL's default when num_iterations=1)
FUSIONS = ("ref_old", "rollout_logprobs", "on_policy_old")
SHARDINGS = ("full", "optimizer", "none")
KV_CACHES = ("paged", "concat")
ENGINE_MODES = ("cuda_graphs", "eager")

# The neutral launch shape (no --framework): token-packed micro-batches of 16,384 tokens per GPU,
# verl's actor budget (ppo_max_token_len_per_gpu, verl/trainer/config/actor/actor.yaml, and
# rlbench's equal-work contract, equal_work.TOKEN_BUDGET_PER_GPU), which OpenRLHF's
# --train.max_tokens_per_gpu takes too. Never one sequence per micro-batch: FSDP would re-gather
# the whole model for every sequence. WorkloadShape's own default (micro_batch_size=1, no token
# budget) is the pure model's literal input; rlbench's predictions start from this one.
NEUTRAL_MICRO_BATCH_TOKENS = 16384


def check_positive(owner: str, field: str, value: object, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{owner}.{field}={value!r}: must be an integer >= {minimum}")


def check_boolean(owner: str, field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{owner}.{field}={value!r}: must be True or False")


def check_choice(owner: str, field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{owner}.{field}={value!r}: must be one of {', '.join(choices)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkloadShape:
    prompts_per_step: int
    group_size: int = 1  # responses sampled per prompt (GRPO's G; PPO usually 1)
    prompt_len: int
    response_len: int  # the fixed length, or the longest response when fixed_length=False
    algorithm: Literal["grpo", "ppo"] = "grpo"  # PPO trains a critic; GRPO has none
    use_kl_reference: bool = True  # a frozen reference model's log-probs for the KL term
    recompute_old_logprob: bool = True  # verl and OpenRLHF recompute pi_old with the trainer
    reward_model: bool = False  # True: a learned RM (same arch, scalar head); False: rule reward on CPU
    ppo_epochs: int = 1
    mini_batch_prompts: int | None = None  # prompts per optimizer step; None: the whole batch
    micro_batch_size: int = 1  # sequences per forward/backward per GPU
    micro_batch_tokens: int | None = None  # token-packed micro-batches (verl dynamic bsz, NeMo packing)
    gradient_checkpointing: bool = False
    fixed_length: bool = True
    mean_response_len: float | None = None  # only with fixed_length=False; None: response_len
    # One tail quantile of the response lengths (fixed_length=False with a mean): the lengths are then a
    # distribution (lengths.ResponseLengths) and a batch's decode depth is its expected longest response,
    # not the cap. None: the longest response of every batch is response_len.
    response_tail_len: float | None = None
    response_tail_quantile: float = 0.9  # 0.9 (p90) or 0.99 (p99)
    # True: a prompt's G samples share one prefill (vLLM n > 1, prefix caching); False: every
    # sequence is prefilled (Hugging Face generate on G repeated rows: TRL without vLLM).
    shared_prefill: bool = True
    # The rollout engine's KV block, in tokens. Prefix caching shares whole blocks only, and the
    # last prompt token is always computed (vLLM v1/core/kv_cache_manager.py: a cache hit stops
    # at prompt length - 1), so with shared_prefill each further sample of a prompt still
    # prefills the rest of its prompt (rollout.unshared_prompt_len). 16: vLLM's default
    # (config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE); its CPU backend's is 128 (platforms/cpu.py).
    prefix_block_tokens: int = 16
    # Bytes per weight, activation and KV element as the framework computes: 2 for bf16/fp16
    # (every GPU recipe here), 4 for fp32 (the frameworks' CPU path).
    dtype_bytes: int = 2
    # How the rollout engine keeps the KV cache (rollout.kv_traffic_per_cached_token):
    # "paged": vLLM / SGLang blocks, the new token written in place and each cached token read
    # once per step; "concat": Hugging Face's DynamicCache, grown by torch.cat every step (TRL
    # without vLLM), which copies the whole cache each step.
    kv_cache: str = "paged"
    # The prompt width the framework computes on when it left-pads each batch to its longest
    # prompt (TRL: Hugging Face generate and the loss's forward run on rows x that width, pads
    # included); None: the mean prompt_len (vLLM pages each sequence; verl and OpenRLHF pack).
    padded_prompt_len: int | None = None
    # The same for the training passes alone, where the rollout engine pages each sequence but the trainer pads
    # (verl's actor.model.use_remove_padding false: its dataset left-pads prompts to max_prompt_length): the
    # log-prob, value and update passes compute each sequence at this + response_len; generation does not.
    trainer_padded_prompt_len: int | None = None
    # The same for the critic alone, where it pads while the actor packs (verl's critic.model.use_remove_padding
    # false beside the actor's true): its value and update passes compute each sequence at this + response_len.
    critic_padded_prompt_len: int | None = None
    # CPU offload (stages.trainer_pass; over Hardware.host_link_bytes_per_s, no term where that is unknown):
    # ref_offload: the reference model's parameter shards live in host memory and are copied in for every
    # micro-batch's forward (FSDP CPUOffload(offload_params=True), which verl forces on its reference model);
    # the copies overlap compute as FSDP's prefetched gathers do. offload: the actor's and critic's fp32
    # parameter shards and Adam states live in host memory between stages (verl's param_offload and
    # optimizer_offload): each stage loads its model's shard before it computes and puts it back after.
    # update_offload: the same around the updates alone, the forwards keeping their bf16 parameters on the device
    # (OpenRLHF's colocated --ds.enable_sleep: DeepSpeed offloads fp32 master weights and optimizer states).
    ref_offload: bool = False
    offload: bool = False
    update_offload: bool = False
    # How the rollout engine runs a decode step: "cuda_graphs" (vLLM's default, enforce_eager=False)
    # or "eager" (enforce_eager=True; Hugging Face generate). Used by the estimate only
    # (overheads.ENGINE_STEP_FLOOR_S), never by the roofline bound.
    engine_mode: str = "cuda_graphs"
    # The engine's limits on sequences in flight (estimate only, overheads.engine_steps): vLLM's
    # max_num_seqs, and gpu_memory_utilization (the share of each rollout GPU for weights + KV cache).
    # None: no limit known, every sequence of a replica decodes at once.
    engine_max_seqs: int | None = None
    engine_memory_fraction: float | None = None

    def __post_init__(self) -> None:
        own = "WorkloadShape"
        if self.dtype_bytes not in (2, 4) or isinstance(self.dtype_bytes, bool):
            raise ValueError(f"{own}.dtype_bytes={self.dtype_bytes!r}: must be 2 (bf16/fp16) or 4 (fp32)")
        for field in ("prompts_per_step", "group_size", "response_len", "ppo_epochs", "micro_batch_size"):
            check_positive(own, field, getattr(self, field))
        check_positive(own, "prompt_len", self.prompt_len, minimum=0)
        check_choice(own, "algorithm", self.algorithm, ALGORITHMS)
        check_choice(own, "kv_cache", self.kv_cache, KV_CACHES)
        check_choice(own, "engine_mode", self.engine_mode, ENGINE_MODES)
        if self.engine_max_seqs is not None:
            check_positive(own, "engine_max_seqs", self.engine_max_seqs)
        if self.engine_memory_fraction is not None and (
            not isinstance(self.engine_memory_fraction, (int, float))
            or isinstance(self.engine_memory_fraction, bool)
            or not 0 < self.engine_memory_fraction <= 1
        ):
            raise ValueError(f"{own}.engine_memory_fraction={self.engine_memory_fraction!r}: must be in (0, 1]")
        for field in (
            "use_kl_reference",
            "recompute_old_logprob",
            "reward_model",
            "gradient_checkpointing",
            "fixed_length",
            "shared_prefill",
        ):
            check_boolean(own, field, getattr(self, field))
        check_positive(own, "prefix_block_tokens", self.prefix_block_tokens)
        if self.micro_batch_tokens is not None:
            check_positive(own, "micro_batch_tokens", self.micro_batch_tokens)
        if self.mini_batch_prompts is not None:
            check_positive(own, "mini_batch_prompts", self.mini_batch_prompts)
            if self.prompts_per_step % self.mini_batch_prompts:
                raise ValueError(
                    f"{own}.mini_batch_prompts={self.mini_batch_prompts}: must divide "
                    f"prompts_per_step={self.prompts_per_step}"
                )
        for field in ("padded_prompt_len", "trainer_padded_prompt_len", "critic_padded_prompt_len"):
            if getattr(self, field) is not None:
                check_positive(own, field, getattr(self, field), minimum=self.prompt_len)
        if self.mean_response_len is not None:
            if self.fixed_length:
                raise ValueError(f"{own}.mean_response_len: only meaningful with fixed_length=False")
            if (
                not isinstance(self.mean_response_len, (int, float))
                or not 0 < self.mean_response_len <= self.response_len
            ):
                raise ValueError(
                    f"{own}.mean_response_len={self.mean_response_len!r}: must be in "
                    f"(0, response_len={self.response_len}]"
                )
        if self.response_tail_len is not None:
            if self.mean_response_len is None:
                raise ValueError(f"{own}.response_tail_len: needs fixed_length=False and a mean_response_len")
            try:
                self.lengths  # noqa: B018 -- building the distribution checks the tail against the mean
            except ValueError as exc:
                raise ValueError(f"{own}.response_tail_len: {exc}") from None

    @property
    def sequences(self) -> int:
        """Rollouts per step: prompts x group size."""
        return self.prompts_per_step * self.group_size

    @property
    def mean_response(self) -> float:
        return float(self.mean_response_len if self.mean_response_len is not None else self.response_len)

    @property
    def lengths(self) -> ResponseLengths | None:
        """The response-length distribution, where a tail is given."""
        if self.response_tail_len is None or self.mean_response_len is None:
            return None
        return ResponseLengths(
            mean=self.mean_response_len,
            tail=self.response_tail_len,
            tail_quantile=self.response_tail_quantile,
            cap=self.response_len,
        )

    def longest_response(self, sequences: float) -> int:
        """Decode steps until the last of `sequences` responses ends: the expected longest under the
        distribution, else response_len (the cap, or the longest the workload states)."""
        lengths = self.lengths
        return self.response_len if lengths is None else math.ceil(lengths.expected_longest(sequences))

    @property
    def mean_seq_len(self) -> float:
        return self.prompt_len + self.mean_response

    @property
    def computed_prompt_len(self) -> int:
        """Prompt positions per sequence the hardware computes on: the padded width, else the mean."""
        return self.padded_prompt_len if self.padded_prompt_len is not None else self.prompt_len

    @property
    def computed_seq_len(self) -> float:
        """Positions per sequence a training pass computes on: a padded batch also pads its
        completions to the longest (response_len at most, the value taken); else the mean."""
        if self.padded_prompt_len is None:
            return self.mean_seq_len
        return self.padded_prompt_len + self.response_len

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + self.response_len

    @property
    def tokens_per_step(self) -> float:
        """Prompt + response tokens of the global batch (HybridFlow's throughput numerator)."""
        return self.sequences * self.mean_seq_len

    @property
    def mini_batches(self) -> int:
        return self.prompts_per_step // (self.mini_batch_prompts or self.prompts_per_step)

    @property
    def optimizer_steps(self) -> int:
        return self.ppo_epochs * self.mini_batches

    def micro_batches(self, sequences: int) -> int:
        """Micro-batches one GPU runs for `sequences` sequences (packed by tokens when set)."""
        if self.micro_batch_tokens is not None:
            return max(1, math.ceil(sequences * self.mean_seq_len / self.micro_batch_tokens))
        return math.ceil(sequences / self.micro_batch_size)

    @property
    def micro_batch_tokens_peak(self) -> float:
        """Tokens of the largest micro-batch: a packed one holds at least one longest sequence."""
        if self.micro_batch_tokens is not None:
            return max(self.micro_batch_tokens, self.max_seq_len)
        return self.micro_batch_size * self.max_seq_len

    @property
    def has_critic(self) -> bool:
        return self.algorithm == "ppo"
