"""Workload specification: the frozen dataclasses a workload YAML file loads into.

A workload fixes everything that must be equal across frameworks: data, prompt,
reward, algorithm, model, lengths, batch sizes, steps and sampling. Each dataclass
checks its own fields and raises `ValueError` naming the bad field; the loader in
`rlbench.workloads.catalog` turns that into an `RLBenchError` naming the file.

    rlbench validate gsm8k-grpo-tiny
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Literal

from rlbench.harness.errors import RLBenchError
from rlbench.workloads import dataset_registry

ALGORITHMS = ("grpo", "ppo")


def _require(ok: bool, name: str, why: str) -> None:
    if not ok:
        raise ValueError(f"{name}: {why}")


# The longest run a workload may ask for: published RLVR runs take hundreds to a few thousand steps, and a
# run's prompts are drawn for all its steps up front, so a mistyped count must stop here, not in memory.
MAX_STEPS = 100_000


def _positive_int(value: object, name: str) -> None:
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        name,
        f"must be a positive integer, got {value!r}",
    )


def _integer(value: object, name: str) -> None:
    # bool is an int in Python, but `warmup_steps: true` is a mistake, not 1
    _require(isinstance(value, int) and not isinstance(value, bool), name, f"must be an integer, got {value!r}")


def _boolean(value: object, name: str) -> None:
    # YAML's true/false only: a string such as "no" is truthy and would silently turn the setting on
    _require(isinstance(value, bool), name, f"must be true or false, got {value!r}")


def _template_problem(template: str) -> str | None:
    """Why `template` cannot be filled with only {question} by str.format, or None."""
    fix = "write a literal brace as {{ or }}"
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:  # a lone { or }
        return f"is not a valid format string ({exc}); {fix}"
    other = sorted(f"{{{name}}}" for name in fields if name != "question")
    if other:
        return f"has the field(s) {', '.join(other)}, but only {{question}} is filled in; {fix}"
    if not fields:
        return f"lacks the field {{question}}; {fix}"
    try:
        template.format(question="")
    except (ValueError, TypeError) as exc:  # a bad conversion or format spec, e.g. {question:zz}
        return f"cannot be filled ({exc}); {fix}"
    return None


def _number_in(value: object, name: str, low: float, high: float) -> None:
    _require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high,
        name,
        f"must be a number in [{low}, {high}], got {value!r}",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class DataSpec:
    dataset: str
    split: str
    limit: int | None = None  # first N problems; None = the whole split
    shuffle_seed: int = 0

    def __post_init__(self) -> None:
        # Looked up at call time, so a dataset is valid exactly when it has a registry row.
        known = dataset_registry.DATASETS.get(self.dataset) if isinstance(self.dataset, str) else None
        _require(known is not None, "data.dataset", dataset_registry.unknown_dataset(self.dataset))
        _require(self.split in known.splits, "data.split", known.unknown_split(self.split))
        _integer(self.shuffle_seed, "data.shuffle_seed")
        if self.limit is not None:
            _positive_int(self.limit, "data.limit")


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptSpec:
    template: str  # str.format template with a {question} field
    chat: bool = True  # wrap in the tokenizer's chat template as one user turn

    def __post_init__(self) -> None:
        _require(isinstance(self.template, str), "prompt.template", "must be a string containing the field {question}")
        problem = _template_problem(self.template)
        _require(problem is None, "prompt.template", str(problem))
        _boolean(self.chat, "prompt.chat")


@dataclass(frozen=True, kw_only=True, slots=True)
class AlgorithmSpec:
    name: Literal["grpo", "ppo"]
    group_size: int  # responses sampled per prompt (GRPO's G; 1 is usual for PPO)
    kl_coef: float = 0.0  # 0 disables the reference model
    clip_ratio: float = 0.2
    epochs: int = 1  # optimisation passes over each rollout batch
    learning_rate: float = 1e-6

    def __post_init__(self) -> None:
        _require(
            self.name in ALGORITHMS, "algorithm.name", f"must be one of {', '.join(ALGORITHMS)}, got {self.name!r}"
        )
        _positive_int(self.group_size, "algorithm.group_size")
        _require(
            self.name != "grpo" or self.group_size >= 2,
            "algorithm.group_size",
            "GRPO needs at least 2 responses per prompt for a group baseline",
        )
        _number_in(self.kl_coef, "algorithm.kl_coef", 0.0, 10.0)
        _number_in(self.clip_ratio, "algorithm.clip_ratio", 0.0, 1.0)
        _positive_int(self.epochs, "algorithm.epochs")
        _number_in(self.learning_rate, "algorithm.learning_rate", 0.0, 1.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class TinyModelSpec:
    """A randomly initialised Qwen2-style model built locally (no download).

    num_experts > 0 makes it a mixture of experts: every layer's MLP becomes `num_experts`
    routed experts of width `expert_intermediate_size`, `experts_per_token` of them per token,
    plus one gated shared expert of width `shared_expert_intermediate_size` when that is > 0
    (Qwen2-MoE's layout; without a shared expert, Qwen3-MoE's). The MoE fields stay 0 on a
    dense model.

    end_probability > 0 builds a dense model whose every generated token is the end of text with that
    probability, whatever the prompt (the other tokens uniformly likely): response lengths are then geometric,
    the same distribution for every framework's sampler, capped by max_response_length (tiny_model.py).
    """

    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4  # head_dim = hidden/heads = 64, which vLLM's CPU attention needs
    num_kv_heads: int = 2
    intermediate_size: int = 688
    vocab_size: int = 2048  # target size of the locally trained BPE tokenizer
    num_experts: int = 0  # 0: dense
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0  # 0: no shared expert
    end_probability: float = 0.0  # each generated token ends the response with this probability; 0: untouched

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size", "vocab_size"):
            _positive_int(getattr(self, name), f"model.tiny.{name}")
        _require(self.hidden_size % self.num_heads == 0, "model.tiny.num_heads", "must divide hidden_size")
        _require(self.num_heads % self.num_kv_heads == 0, "model.tiny.num_kv_heads", "must divide num_heads")
        _number_in(self.end_probability, "model.tiny.end_probability", 0.0, 0.5)
        _require(
            not (self.end_probability and self.num_experts),
            "model.tiny.end_probability",
            "is for a dense tiny model; set model.tiny.num_experts: 0 or remove end_probability",
        )
        for name in MOE_FIELDS:
            _integer(getattr(self, name), f"model.tiny.{name}")
            _require(getattr(self, name) >= 0, f"model.tiny.{name}", f"must be >= 0, got {getattr(self, name)}")
        if not self.num_experts:
            for name in MOE_FIELDS[1:]:
                _require(
                    getattr(self, name) == 0,
                    f"model.tiny.{name}",
                    "is for a mixture of experts only; set model.tiny.num_experts > 0 or remove it",
                )
            return
        _require(
            1 <= self.experts_per_token <= self.num_experts,
            "model.tiny.experts_per_token",
            f"must be in 1..num_experts ({self.num_experts}), got {self.experts_per_token}",
        )
        _positive_int(self.expert_intermediate_size, "model.tiny.expert_intermediate_size")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


# TinyModelSpec's mixture-of-experts fields, num_experts first: all 0 on a dense model.
MOE_FIELDS = ("num_experts", "experts_per_token", "expert_intermediate_size", "shared_expert_intermediate_size")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    name: str  # hub id (e.g. Qwen/Qwen2.5-0.5B-Instruct), a local path, or "tiny"
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    tiny: TinyModelSpec | None = None

    def __post_init__(self) -> None:
        _require(isinstance(self.name, str) and bool(self.name), "model.name", "must be a hub id, a path or 'tiny'")
        _require(
            self.dtype in ("bfloat16", "float32"), "model.dtype", f"must be bfloat16 or float32, got {self.dtype!r}"
        )
        _require(
            (self.name == "tiny") == (self.tiny is not None),
            "model.tiny",
            "is required exactly when model.name is 'tiny'",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class SamplingSpec:
    temperature: float = 1.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        _number_in(self.temperature, "sampling.temperature", 0.0, 10.0)
        _require(self.temperature > 0, "sampling.temperature", "must be > 0 for RL sampling")
        _number_in(self.top_p, "sampling.top_p", 0.0, 1.0)
        _require(self.top_p > 0, "sampling.top_p", "must be > 0")


# What a quality target may watch. `reward_mean` is the step's mean training reward, logged alike by every
# framework and scored by rlbench's own reward; `eval_accuracy` is the mean of that reward over held-out problems
# (the first `eval_problems` of the dataset's test split, one sample each), evaluated every `eval_every` steps
# through each framework's own validation hook.
TARGET_METRICS = ("reward_mean", "eval_accuracy")


# A bound on one evaluation: every framework decodes the whole set at once, each `eval_every` steps.
MAX_EVAL_PROBLEMS = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetSpec:
    """A quality target (MLPerf's time-to-train): the run has reached it at the first step where the mean of
    `metric` over its last `window` values is at least `value` (for `eval_accuracy`, the last `window`
    evaluations); `stop` ends the run there (else it runs on to `steps`, which is the budget: a run that ends
    first has not reached it)."""

    metric: str = "reward_mean"
    value: float
    window: int = 3
    stop: bool = True
    eval_every: int | None = None  # eval_accuracy only: steps between evaluations (the first after this many)
    eval_problems: int | None = None  # eval_accuracy only: how many test-split problems each evaluation scores

    def __post_init__(self) -> None:
        _require(
            self.metric in TARGET_METRICS,
            "target.metric",
            f"must be one of {', '.join(TARGET_METRICS)}, got {self.metric!r}",
        )
        _number_in(self.value, "target.value", 0.0, 1.0)
        _require(self.value > 0, "target.value", "must be > 0: every run reaches a target of 0 at its first step")
        _positive_int(self.window, "target.window")
        _boolean(self.stop, "target.stop")
        if self.metric != "eval_accuracy":
            for name in ("eval_every", "eval_problems"):
                _require(
                    getattr(self, name) is None,
                    f"target.{name}",
                    "applies to metric eval_accuracy only; remove it or set target.metric: eval_accuracy",
                )
            return
        for name in ("eval_every", "eval_problems"):
            _require(
                getattr(self, name) is not None,
                f"target.{name}",
                "is required with metric eval_accuracy (e.g. eval_every: 5, eval_problems: 16)",
            )
            _positive_int(getattr(self, name), f"target.{name}")
        _require(
            self.eval_problems <= MAX_EVAL_PROBLEMS,
            "target.eval_problems",
            f"must be at most {MAX_EVAL_PROBLEMS:,}, got {self.eval_problems:,}",
        )

    @property
    def evaluates(self) -> bool:
        """Whether the target needs held-out evaluation during the run."""
        return self.metric == "eval_accuracy"


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    name: str
    version: int
    description: str = ""
    data: DataSpec
    prompt: PromptSpec
    reward: str  # the dataset's reward, by its registry name (rlbench.workloads.rewards), never inlined
    algorithm: AlgorithmSpec
    model: ModelSpec
    max_prompt_length: int
    max_response_length: int
    prompts_per_step: int
    mini_batch_prompts: int  # prompts per optimiser update
    steps: int
    warmup_steps: int  # excluded from summary statistics
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    fixed_length: bool = False  # systems mode: every response generated to max length
    gradient_checkpointing: bool = True  # recompute activations in the backward pass (all frameworks alike)
    target: TargetSpec | None = None  # a quality target: time to reach it is recorded (and may end the run)

    def __post_init__(self) -> None:
        _require(isinstance(self.name, str) and bool(self.name), "name", "must be a non-empty string")
        _positive_int(self.version, "version")
        _require(isinstance(self.description, str), "description", f"must be a string, got {self.description!r}")
        _require(
            self.reward == self.data.dataset,
            "reward",
            f"must be the reward of the workload's dataset ({self.data.dataset!r}), got {self.reward!r}",
        )
        for name in ("max_prompt_length", "max_response_length", "prompts_per_step", "mini_batch_prompts", "steps"):
            _positive_int(getattr(self, name), name)
        _require(self.steps <= MAX_STEPS, "steps", f"must be at most {MAX_STEPS:,}, got {self.steps:,}")
        _require(
            self.prompts_per_step % self.mini_batch_prompts == 0,
            "mini_batch_prompts",
            f"must divide prompts_per_step ({self.prompts_per_step}), got {self.mini_batch_prompts}",
        )
        _integer(self.warmup_steps, "warmup_steps")
        _require(
            0 <= self.warmup_steps < self.steps,
            "warmup_steps",
            f"must be an integer in [0, steps), got {self.warmup_steps!r}",
        )
        _boolean(self.fixed_length, "fixed_length")
        _require(
            not (self.fixed_length and self.model.tiny is not None and self.model.tiny.end_probability),
            "fixed_length",
            "generates every response to max_response_length, so model.tiny.end_probability would end none; "
            "set fixed_length: false",
        )
        _boolean(self.gradient_checkpointing, "gradient_checkpointing")
        if self.target is not None and self.target.evaluates:
            _require(
                self.target.eval_every <= self.steps,
                "target.eval_every",
                f"must be at most steps ({self.steps}): no evaluation would run, got {self.target.eval_every}",
            )

    @property
    def responses_per_step(self) -> int:
        return self.prompts_per_step * self.algorithm.group_size

    @property
    def updates_per_step(self) -> int:
        """Optimiser updates per RL step: mini-batches times epochs."""
        return self.prompts_per_step // self.mini_batch_prompts * self.algorithm.epochs

    def with_steps(self, steps: int) -> Workload:
        """The same workload run for a different number of steps (warm-up clipped to fit)."""
        from dataclasses import replace

        try:
            return replace(self, steps=steps, warmup_steps=min(self.warmup_steps, steps - 1))
        except ValueError as exc:  # e.g. fewer steps than the target's eval_every
            raise RLBenchError(f"--steps {steps}: workload {self.name}: {exc}; choose more steps") from None
