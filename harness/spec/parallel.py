"""Parallelism settings of a run: the `--parallel key=value` knobs, parsed and checked.

Each knob has one meaning in every framework (the table: docs/parallelism.md); each adapter maps
the ones its framework honours onto the framework's own configuration and refuses the others,
with the reason, before anything launches.

    rlbench run --framework verl --workload gsm8k-grpo --parallel dp=4 --parallel tp=2 --parallel rollout_tp=2

`tp` is the trainer's tensor parallelism; the rollout engine's is `rollout_tp`. Records written
before the two were separated used `tp` for the rollout's: `rlbench.harness.record.run_record.migrate` moves it.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rlbench.harness.errors import RLBenchError

if TYPE_CHECKING:
    from rlbench.harness.perfmodel import ModelArch

PLACEMENTS = ("colocated", "disaggregated")
# async=K (K >= 2) is k-step off-policy. async=fully: a rollouter streaming samples beside a trainer that takes a
# step's worth at a time (verl's fully-async trainer), samples at most one step's worth ahead: depth 1.
ASYNC_WORDS = {"off": 0, "one-step": 1, "fully": 1}
SWITCHES = ("off", "on")  # partial_rollout
# Stage fusion, as the performance model names it (ParallelShape.fuse): which pass is removed or merged.
FUSIONS = ("rollout_logprobs", "on_policy_old", "ref_old")
# Trainer knobs only a Megatron-style backend honours (FSDP and ZeRO-3 have no tp, pp, cp or ep).
MEGATRON_KNOBS = ("tp", "pp", "cp", "ep")
INTEGER_KNOBS = ("dp", "tp", "rollout_tp", "pp", "pp_virtual", "cp", "ep", "sp", "nodes")
# unset (None) means: etp the framework's default (etp = tp); gpus_per_node the cluster's (or the job's GPUs / nodes)
OPTIONAL_INTEGER_KNOBS = ("etp", "gpus_per_node")
NODE_KNOBS = ("nodes", "gpus_per_node")  # where the GPUs are, not how the work is split


def knob_pairs(knobs: Mapping[str, object]) -> list[str]:
    """`{"dp": 2, "tp": 1}` as the command line's `["dp=2", "tp=1"]`; an unset optional knob (None) has no pair."""
    return [f"{k}={v}" for k, v in knobs.items() if v is not None]


def knob_label(knobs: Mapping[str, object], empty: str = "defaults") -> str:
    """Knobs as one label, `dp=2 tp=1`, or `empty` when none is set: the one spelling every table uses."""
    return " ".join(knob_pairs(knobs)) or empty


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallelism:
    """Trainer GPUs = dp x tp x pp x cp x sp; expert ranks (ep) are carved out of dp x sp x cp, as in
    Megatron, and with etp below tp out of (tp / etp) x dp x sp x cp (MoE parallel folding). The rollout
    engine's tensor-parallel groups of size rollout_tp divide those same GPUs
    when colocated (verl's hybrid engine, OpenRLHF's colocate_all, TRL's colocated vLLM)."""

    dp: int = 1  # data parallel (FSDP / ZeRO / Megatron DP) degree of the trainer
    tp: int = 1  # tensor parallel size of the trainer (Megatron TP, DeepSpeed AutoTP)
    rollout_tp: int = 1  # tensor parallel size of each rollout engine (vLLM)
    pp: int = 1  # pipeline parallel stages of the trainer
    pp_virtual: int = 1  # virtual stages per pipeline rank (interleaved 1F1B); needs pp > 1
    cp: int = 1  # context parallel (ring attention over the sequence) size of the trainer
    ep: int = 1  # expert parallel size of the trainer's MoE layers
    etp: int | None = None  # expert tensor parallel size (divides tp); unset: tp, Megatron-Core's default
    sp: int = 1  # sequence parallel (Ulysses all-to-all over heads) size of the trainer
    placement: Literal["colocated", "disaggregated"] = "colocated"
    fuse: tuple[str, ...] = ()  # stage fusion (FUSIONS), the model's tuple; spelled `fuse=NAME` or `fuse=none`
    async_: str = "off"  # `async` on the command line: off, one-step, fully, or K >= 2 steps (k-step off-policy)
    # on: the rollout engines refill a finished sample's slot with a new one across step boundaries, so no batch
    # waits for its longest sample (AReaL's, verl's fully-async partial rollout); needs disaggregated and async
    partial_rollout: str = "off"
    nodes: int = 1  # machines the job's GPUs (trainer and a disaggregated rollout pool) are spread over, evenly
    gpus_per_node: int | None = None  # GPUs each node has; unset: the cluster's count, or the job's GPUs / nodes

    def __post_init__(self) -> None:
        for name in INTEGER_KNOBS + OPTIONAL_INTEGER_KNOBS:
            value = getattr(self, name)
            if name in OPTIONAL_INTEGER_KNOBS and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RLBenchError(f"--parallel {name}={value!r}: must be a positive integer")
        if self.etp is not None:
            if self.tp % self.etp:
                raise RLBenchError(
                    f"--parallel etp={self.etp}: must divide tp={self.tp} (each expert is split over etp of the "
                    "tensor-parallel ranks); use etp=1 to fold tp into expert parallelism"
                )
        if self.placement not in PLACEMENTS:
            raise RLBenchError(f"--parallel placement={self.placement!r}: must be one of {', '.join(PLACEMENTS)}")
        object.__setattr__(self, "fuse", _fusions(self.fuse))
        object.__setattr__(self, "async_", _async_value(self.async_))
        if self.partial_rollout not in SWITCHES:
            raise RLBenchError(f"--parallel partial_rollout={self.partial_rollout!r}: must be on or off")
        if self.partial_rollout == "on" and (self.placement != "disaggregated" or self.async_ == "off"):
            raise RLBenchError(
                "--parallel partial_rollout=on: refilling the engines' slots across steps needs rollout GPUs of "
                "their own and asynchrony; add --parallel placement=disaggregated and --parallel async=one-step"
            )
        if self.pp_virtual > 1 and self.pp == 1:
            raise RLBenchError(
                f"--parallel pp_virtual={self.pp_virtual}: interleaving needs a pipeline; "
                "add --parallel pp=2 or more, or drop pp_virtual"
            )
        # ep against dp*sp*cp: check_expert_ranks for a run; predict derives dp from --gpus (ParallelShape checks).

    @property
    def world_size(self) -> int:
        """GPUs the trainer spans (rollout engines may add more when disaggregated)."""
        return self.dp * self.tp * self.pp * self.cp * self.sp

    def gpus_on_each_node(self, job_gpus: int) -> int:
        """GPUs of this job on each of its nodes: its `job_gpus` split evenly over `nodes` (check_nodes refuses
        a job that does not split)."""
        return max(1, job_gpus // self.nodes)

    @property
    def megatron_knobs(self) -> dict[str, int]:
        """The MEGATRON_KNOBS set above 1: non-empty when the trainer's layout needs a Megatron-style backend."""
        return {knob: getattr(self, knob) for knob in MEGATRON_KNOBS if getattr(self, knob) > 1}

    @property
    def async_depth(self) -> int:
        """Steps generation may run ahead of training: 0 off, 1 one-step, K k-step."""
        return ASYNC_WORDS[self.async_] if self.async_ in ASYNC_WORDS else int(self.async_)

    @property
    def async_mode(self) -> Literal["off", "one-step", "k-step"]:
        """The performance model's name for the depth (ParallelShape.async_mode)."""
        return "off" if self.async_depth == 0 else "one-step" if self.async_depth == 1 else "k-step"

    def non_default(self) -> dict[str, object]:
        """The knobs set away from their defaults, by command-line name and spelling."""
        default = Parallelism().to_dict()
        return {k: v for k, v in self.to_dict().items() if v != default[k]}

    def to_dict(self) -> dict[str, object]:
        """Every knob by command-line name and spelling (`knob_pairs` of it parses back to this)."""
        return {_cli_name(f.name): _cli_value(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _cli_name(field_name: str) -> str:
    return field_name.rstrip("_")


def _cli_value(value: Any) -> Any:
    if isinstance(value, tuple):  # fuse
        return "+".join(value) or "none"
    return value


def _fusions(value: Any) -> tuple[str, ...]:
    """fuse as a tuple in FUSIONS order, from a tuple/list or the command line's `NAME` / `none` (`a+b` parses,
    but every pair of today's fusions removes the same pass twice, so at most one is accepted)."""
    names = [v.strip() for v in value.split("+")] if isinstance(value, str) else list(value)
    names = [n for n in names if n and n != "none"]
    for name in names:
        if name not in FUSIONS:
            close = difflib.get_close_matches(name, FUSIONS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise RLBenchError(
                f"--parallel fuse={name!r}: unknown fusion; {hint}fusions: {', '.join(FUSIONS)}, or none"
            )
    fused = tuple(f for f in FUSIONS if f in names)
    if len(set(fused) & {"rollout_logprobs", "on_policy_old"}) == 2 or "ref_old" in fused and len(fused) > 1:
        raise RLBenchError(
            f"--parallel fuse={'+'.join(fused)}: each of these removes or merges the old-log-prob "
            "pass, so at most one applies; keep one"
        )
    return fused


def _async_value(value: Any) -> str:
    """async as its canonical spelling: off, one-step, fully, or the depth K >= 2 written as a number."""
    text = str(value).strip()
    if text in ASYNC_WORDS:
        return text
    try:
        depth = int(text)
    except ValueError:
        depth = -1
    if depth < 0 or isinstance(value, bool) or isinstance(value, float):
        raise RLBenchError(
            f"--parallel async={value!r}: must be one of off, one-step, fully (a streaming rollouter), or a whole "
            "number of steps K >= 2 that generation may run ahead of training (async=2)"
        )
    return {0: "off", 1: "one-step"}.get(depth, str(depth))


KNOBS = tuple(_cli_name(f.name) for f in dataclasses.fields(Parallelism))


def parse_parallel(pairs: tuple[str, ...] | list[str]) -> Parallelism:
    """Parse repeated `key=value` strings; an unknown key suggests the nearest one."""
    values: dict[str, object] = {}
    seen: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not raw.strip():
            raise RLBenchError(f"--parallel {pair!r}: expected key=value, e.g. dp=2; keys: {', '.join(KNOBS)}")
        if key not in KNOBS:
            close = difflib.get_close_matches(key, KNOBS, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise RLBenchError(f"--parallel {pair!r}: unknown knob '{key}'; {hint}knobs: {', '.join(KNOBS)}")
        raw = raw.strip()
        if key in seen:  # taking the last one silently would run a layout the user did not read back
            raise RLBenchError(
                f"--parallel {key}= is given twice ({seen[key]} and {pair.strip()}); give each knob once"
            )
        seen[key] = pair.strip()
        if key in INTEGER_KNOBS + OPTIONAL_INTEGER_KNOBS:
            try:
                values[key] = int(raw)
            except ValueError:
                raise RLBenchError(f"--parallel {pair!r}: {key} must be a positive integer") from None
        else:
            values[key + ("_" if key == "async" else "")] = raw
    return Parallelism(**values)


def parse_grid(
    pairs: tuple[str, ...] | list[str], *, flag: str = "--grid", knobs: tuple[str, ...] = KNOBS, word: str = ""
) -> tuple[dict[str, list[str]], bool]:
    """`--grid tp=1,2,4` (repeatable) -> ({"tp": ["1", "2", "4"]}, False): the one `KNOB=V1,V2` parser.

    `rlbench sweep --grid` takes any of `knobs`; `rlbench predict --sweep` the layout axes and also the
    bare `word` "all" (every axis over its default range), which sets the returned flag."""
    forms = f"{word}, or KNOB=V1,V2" if word else "KNOB=V1,V2"
    grid: dict[str, list[str]] = {}
    every = False
    for pair in pairs:
        if word and pair.strip() == word:
            every = True
            continue
        key, _, raw = pair.partition("=")
        key, values = key.strip(), [v.strip() for v in raw.split(",") if v.strip()]
        expected = f"{flag} {pair!r}: expected {forms} once per knob, e.g. {flag} tp=1,2,4"
        if key not in knobs:
            close = difflib.get_close_matches(key, knobs, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise RLBenchError(f"{expected}; unknown knob '{key}'; {hint}knobs: {', '.join(knobs)}")
        if not values or key in grid:
            raise RLBenchError(expected)
        grid[key] = values
    return grid, every


def splits_heads(n: int, heads: int, kv_heads: int) -> bool:
    """Whether n ranks can split a layer's attention: every rank n-th of the query heads, and the KV
    heads divided among them (kv_heads % n == 0) or each KV head copied to n/kv_heads ranks."""
    return heads % n == 0 and (kv_heads % n == 0 or n % kv_heads == 0)


def splits_heads_evenly(n: int, heads: int, kv_heads: int) -> bool:
    """Megatron's rule for the trainer's TP: query and KV heads both divide (num_query_groups % tp == 0)."""
    return heads % n == 0 and kv_heads % n == 0


# knob -> (rule, who splits the heads that way)
_HEAD_RULES = {
    "tp": (splits_heads_evenly, "Megatron cannot split it over the trainer's TP ranks"),
    "rollout_tp": (splits_heads, "vLLM cannot shard it"),
    "sp": (splits_heads, "Ulysses cannot scatter its heads"),
}


def check_heads(parallel: Parallelism, arch: ModelArch | None, model: str) -> None:
    """Refuse, before anything launches, a tp, rollout_tp or sp that cannot split the model's attention heads.

    The one check `run` (every adapter's `check`), `sweep` (through those checks) and `predict` make.
    rollout_tp: vLLM's tensor parallelism gives each rank heads/n query heads and kv_heads/n KV heads, or
    replicates KV heads when n > kv_heads (vLLM `QKVParallelLinear`; it refuses other shapes at start-up).
    tp: Megatron's (and DeepSpeed AutoTP's) attention splits query and KV heads evenly, no replication.
    sp: verl's Ulysses all-to-all scatters heads as vLLM does (`verl/utils/ulysses.py`, KV heads
    repeated to sp when fewer). OpenRLHF's ring attention splits the sequence instead, but the rule
    holds for every framework so that a layout is run by all of them or by none (equal work).
    cp splits the sequence, not heads: no check. `arch` None: the model's config was not found here,
    which refuses any of these knobs above 1.
    """
    splits = {name: getattr(parallel, name) for name in _HEAD_RULES if getattr(parallel, name) > 1}
    if not splits:
        return
    if arch is None:
        raise _no_config(splits, "attention heads", model)
    for name, n in splits.items():
        rule, who = _HEAD_RULES[name]
        if rule(n, arch.heads, arch.kv_heads):
            continue
        fits = [k for k in range(1, arch.heads + 1) if rule(k, arch.heads, arch.kv_heads)]
        if arch.heads % n:
            why = f"{n} does not divide its {arch.heads} attention heads"
        elif rule is splits_heads_evenly:
            why = f"{n} does not divide its {arch.kv_heads} KV heads"
        else:
            why = f"{n} neither divides its {arch.kv_heads} KV heads nor is a multiple of them"
        raise RLBenchError(
            f"--parallel {name}={n}: model {arch.name} ({arch.source or 'config'}): {why}, so "
            f"{who}; use {name} in {', '.join(map(str, fits))}"
        )


def check_model_split(parallel: Parallelism, arch: ModelArch | None, model: str) -> None:
    """Refuse an ep the model's experts cannot take, or a pipeline its layers cannot: the perf model's
    sweep skips the same layouts (checks "experts" and "layers"). `arch` None refuses ep or pp above 1."""
    asked = {name: getattr(parallel, name) for name in ("ep", "pp") if getattr(parallel, name) > 1}
    if not asked:
        return
    if arch is None:
        raise _no_config(asked, "experts and layers", model)
    ep, chunks = parallel.ep, parallel.pp * parallel.pp_virtual
    if ep > 1 and not arch.is_moe:
        raise RLBenchError(f"--parallel ep={ep}: model {arch.name} is dense, it has no experts to split; use ep=1")
    if ep > 1 and arch.moe_experts % ep:
        fits = [k for k in range(1, arch.moe_experts + 1) if arch.moe_experts % k == 0]
        raise RLBenchError(
            f"--parallel ep={ep}: does not divide the {arch.moe_experts} experts of model {arch.name}; "
            f"use ep in {', '.join(map(str, fits))}"
        )
    if arch.layers % chunks:
        what = (
            f"pp={parallel.pp} x pp_virtual={parallel.pp_virtual} = {chunks}"
            if parallel.pp_virtual > 1
            else f"pp={parallel.pp}"
        )
        raise RLBenchError(
            f"--parallel {what}: does not divide the {arch.layers} layers of model {arch.name}; "
            "pick a pipeline whose stages hold whole layers"
        )


def check_expert_ranks(parallel: Parallelism) -> None:
    """Refuse an ep that does not divide (tp / etp) x dp x sp x cp: Megatron carves expert ranks out of the
    data-parallel ones, and with etp below tp out of the tensor-parallel ones too."""
    folded = parallel.tp // parallel.etp if parallel.etp is not None else 1
    expert_ranks = folded * parallel.dp * parallel.sp * parallel.cp
    if expert_ranks % parallel.ep:
        pool = f"(tp/etp)*dp*sp*cp = {folded}*{parallel.dp * parallel.sp * parallel.cp}" if folded > 1 else "dp*sp*cp"
        raise RLBenchError(
            f"--parallel ep={parallel.ep}: must divide {pool} = {expert_ranks} (expert ranks are "
            "carved out of the data-parallel ones); raise dp, lower ep, or fold tp in with etp=1"
        )


def check_nodes(parallel: Parallelism, pools: dict[str, int]) -> None:
    """Refuse a node count the job's GPU pools (name -> GPUs, e.g. {"trainer": 8, "rollout": 8}) cannot be
    spread over evenly, or more GPUs per node than `gpus_per_node` says a node has. Frameworks place each pool
    over all the job's nodes (verl trainer.nnodes / rollout.nnodes, OpenRLHF *.num_nodes), the same count on each."""
    nodes = parallel.nodes
    for name, gpus in pools.items():
        if gpus and gpus % nodes:
            raise RLBenchError(
                f"--parallel nodes={nodes}: the {name}'s {gpus} GPU(s) do not split evenly over {nodes} nodes; "
                f"use a node count that divides {gpus}, or raise dp"
            )
    per_node = sum(gpus // nodes for gpus in pools.values())
    if parallel.gpus_per_node is not None and per_node > parallel.gpus_per_node:
        raise RLBenchError(
            f"--parallel gpus_per_node={parallel.gpus_per_node}: this layout puts {per_node} GPUs on each of its "
            f"{nodes} node(s); use more nodes, or a smaller layout"
        )


def _no_config(asked: dict[str, int], what: str, model: str) -> RLBenchError:
    """The refusal of knobs that split the model where its architecture (config.json) is not here."""
    knobs = " ".join(f"{name}={n}" for name, n in asked.items())
    return RLBenchError(
        f"--parallel {knobs}: cannot check it against the {what} of model '{model}': its config.json is not "
        "here (no local folder, not in the Hugging Face cache, not in rlbench's built-in table); fetch it first: "
        f"huggingface-cli download {model} config.json"
    )
