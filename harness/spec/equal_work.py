"""The equal-work contract: the rollout-engine settings and per-role token budgets of every framework's launch.

A workload fixes the RL problem (data, prompts, lengths, batches, algorithm). What else changes the
work a framework does, or the engine it does it with, is fixed here once, and every adapter takes
it from here: verl as Hydra overrides, OpenRLHF as flags, TRL as `GRPOConfig` fields. Where a
framework has no way to set one of them, or runs a pass the others do not, its adapter names the
difference (`Adapter.equal_work`); run.json records the contract, what the launch set and the named
differences under `equal_work`.

    from rlbench.harness.spec.equal_work import contract
    from rlbench.harness.spec.parallel import Parallelism
    from rlbench.workloads.catalog import load_workload
    contract(load_workload("gsm8k-grpo"), Parallelism()).to_dict()
    # {'engine.max_num_seqs': 256, ..., 'budget.critic': 16384}

Values: verl 0.9.1's own rollout defaults (`verl/trainer/config/rollout/rollout.yaml`: 256 sequences,
8192 batched tokens, prefix caching on, 0.5 of a GPU shared with training, CUDA graphs, asleep
while training when colocated) and its 16384-token actor budget; a rollout GPU of its own gives vLLM 0.9 of its
memory (vLLM's own default
for an engine that owns its GPU). The critic and the log-prob passes get the actor's budget, the one
budget OpenRLHF 0.11 has for training (`--train.max_tokens_per_gpu`, actor and critic alike).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlbench.harness.spec.parallel import Parallelism
from rlbench.workloads.spec import Workload
from rlbench.workloads.tail import declared_lengths

MAX_NUM_SEQS = 256
MAX_NUM_BATCHED_TOKENS = 8192
TOKEN_BUDGET_PER_GPU = 16384
GPU_MEMORY_COLOCATED = 0.5  # vLLM's share of a GPU that also holds the trainer (asleep while it trains)
GPU_MEMORY_DEDICATED = 0.9  # a rollout GPU of its own (placement=disaggregated)
# The optimiser every adapter sets, whatever the framework's own default: AdamW with PyTorch's betas, no weight
# decay, gradients clipped at norm 1 (TRL's and verl's defaults but for verl's weight decay 0.01; OpenRLHF's own
# beta2 is 0.95). Measured on the learnable tiny workload, these were the only optimiser terms that differed.
ADAM_BETAS = (0.9, 0.999)
WEIGHT_DECAY = 0.0
GRAD_CLIP = 1.0
UNEXPLAINED = "no reason named"  # marks a launch value that differs from the contract without one


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineSettings:
    """The vLLM engine every framework's rollout gets (each engine, rollout_tp GPUs wide)."""

    max_num_seqs: int  # sequences decoded together
    max_num_batched_tokens: int  # tokens per scheduler step (chunked prefill)
    enable_prefix_caching: bool  # GRPO's G responses of a prompt share its prefill
    gpu_memory_utilization: float  # weights + KV cache budget, as a fraction of each GPU
    enforce_eager: bool  # False: CUDA graphs
    sleep_mode: bool  # colocated: the engine frees its GPU memory while the trainer runs, and wakes for rollout


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenBudgets:
    """Tokens per GPU per micro-batch (token-packed dynamic batches), by role."""

    actor: int  # the policy update
    log_prob: int  # forward-only passes: old log-probs, the reference model
    critic: int | None  # the critic's update and its values pass; None: no critic (GRPO)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSettings:
    """How the trainer's passes run over a micro-batch."""

    packing: bool  # sequences packed without padding (padding-free, varlen attention)
    gradient_checkpointing: bool  # the workload's choice: activations recomputed in the backward pass


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimSettings:
    """The optimiser the policy trains with (and a PPO critic, which each adapter sets alike): AdamW."""

    adam_betas: tuple[float, float]
    weight_decay: float
    grad_clip: float  # the gradients' global norm is clipped to this


@dataclass(frozen=True, kw_only=True, slots=True)
class Contract:
    engine: EngineSettings
    budget: TokenBudgets
    train: TrainSettings
    optim: OptimSettings
    # How the responses' lengths are the same work for every framework (a statement, not a term a setting
    # carries): generated to the cap, or sampled from one distribution that each run realises on its own.
    lengths: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Flat `engine.<field>` / `budget.<role>` / `train.<field>` / `optim.<field>` names: the keys adapters map
        and records state (a pair such as the betas as a list, as JSON and the frameworks' configs hold it)."""
        terms = {
            f"{part}.{f.name}": getattr(getattr(self, part), f.name)
            for part in ("engine", "budget", "train", "optim")
            for f in dataclasses.fields(getattr(self, part))
        }
        return {
            term: list(value) if isinstance(value, tuple) else value
            for term, value in terms.items()
            if value is not None
        }


def contract(workload: Workload, parallel: Parallelism) -> Contract:
    """The contract of one run: the engine settings for its placement and its budgets (never below one
    whole prompt + response, so a sequence always fits one micro-batch and one scheduler step)."""
    sequence = workload.max_prompt_length + workload.max_response_length
    budget = max(TOKEN_BUDGET_PER_GPU, sequence)
    memory = GPU_MEMORY_COLOCATED if parallel.placement == "colocated" else GPU_MEMORY_DEDICATED
    return Contract(
        engine=EngineSettings(
            max_num_seqs=MAX_NUM_SEQS,
            max_num_batched_tokens=max(MAX_NUM_BATCHED_TOKENS, sequence),
            enable_prefix_caching=True,
            gpu_memory_utilization=memory,
            enforce_eager=False,
            sleep_mode=parallel.placement == "colocated",
        ),
        budget=TokenBudgets(actor=budget, log_prob=budget, critic=budget if workload.algorithm.name == "ppo" else None),
        train=TrainSettings(packing=True, gradient_checkpointing=workload.gradient_checkpointing),
        optim=OptimSettings(adam_betas=ADAM_BETAS, weight_decay=WEIGHT_DECAY, grad_clip=GRAD_CLIP),
        lengths=lengths_statement(workload),
    )


def lengths_statement(workload: Workload) -> str:
    """run.json `equal_work.lengths`: what makes the responses' lengths the same work, or where they differ."""
    if workload.fixed_length:
        return f"every response generated to the cap, {workload.max_response_length} tokens (the end of text ignored)"
    declared = declared_lengths(workload)
    source = (
        f"one declared distribution (model.tiny.end_probability {declared['end_probability']:g}: mean "
        f"{declared['mean']:.1f}, p90 {declared['p90']}, cap {declared['cap']} tokens)"
        if declared
        else f"the model's own distribution, up to the cap of {workload.max_response_length} tokens"
    )
    return (
        f"sampled to the end of text from {source}: every framework samples it alike, but each run realises its "
        "own lengths, so the tokens differ run to run (response_lengths says what each generated); compare per "
        "response token as well as per step"
    )


def manifest(
    terms: Contract,
    launched: dict[str, Any],
    keys: dict[str, str],
    named: dict[str, str],
    resolved: tuple[dict[str, Any], str] | None = None,
) -> dict[str, Any]:
    """run.json's `equal_work`: the contract, how the launch set each term, and the named differences.

    launched: the framework's settings as launched (after any CPU-lane change); keys: contract term
    -> the framework's setting for it; named: term (or a pass, e.g. `passes.old_log_prob`) -> why the
    framework differs. A term the launch sets to another value without a named reason is recorded as
    a difference saying so (the tests keep there being none). resolved: (setting -> value, where read)
    as the framework itself resolved them after the run (e.g. verl's saved config); a carried term
    the framework resolved otherwise becomes a difference too."""
    applied: dict[str, str] = {}
    differences = dict(named)
    for term, value in terms.to_dict().items():
        if term in named:
            continue
        key = keys.get(term)
        if key is None or key not in launched:
            differences[term] = UNEXPLAINED + f" (the launch does not set it; contract: {value})"
        elif launched[key] == value:
            applied[term] = f"{key}={launched[key]}"
        else:
            differences[term] = UNEXPLAINED + f" ({key}={launched[key]}; contract: {value})"
    out = {"contract": terms.to_dict(), "applied": applied, "differences": differences, "lengths": terms.lengths}
    if resolved is not None:
        values, source = resolved
        out["resolved"] = {"source": source, "values": {term: values.get(keys[term]) for term in applied}}
        for term, value in out["resolved"]["values"].items():
            if value != terms.to_dict()[term]:
                differences[term] = (
                    UNEXPLAINED + f" (the framework resolved {keys[term]}={value}; launched {applied.pop(term)})"
                )
    return out


def nested_values(tree: Any, keys: Iterable[str]) -> dict[str, Any]:
    """{key: the value at that dotted path of a framework's resolved config tree} (None where absent); a leading
    `+` (Hydra's force-add) is not part of the path."""
    values: dict[str, Any] = {}
    for key in keys:
        node = tree
        for part in key.lstrip("+").split("."):
            node = node.get(part) if isinstance(node, dict) else None
        values[key] = node
    return values


def manifest_changes(baseline: dict[str, Any] | None, candidate: dict[str, Any] | None) -> list[str]:
    """What differs between two records' `equal_work` (contract values, named differences), one line each,
    for `rlbench compare` to say beside the numbers; [] when both are equal or a record has none."""
    if not isinstance(baseline, dict) or not isinstance(candidate, dict):
        return []
    lines = []
    for part in ("contract", "differences"):
        old, new = baseline.get(part) or {}, candidate.get(part) or {}
        for term in dict.fromkeys([*old, *new]):
            if old.get(term) != new.get(term):
                lines.append(f"{part} {term}: {old.get(term, '(none)')} -> {new.get(term, '(none)')}")
    return lines
