"""Parallelism settings of a run: the `--parallel key=value` knobs, parsed and checked.

The knobs are framework-neutral; each adapter maps the ones it supports onto its
framework's own configuration and refuses the others before anything launches.

    rlbench run --framework trl --workload gsm8k-grpo --parallel dp=8 --parallel tp=2
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rlbench.errors import RLBenchError

if TYPE_CHECKING:
    from rlbench.perfmodel.arch import ModelArch

PLACEMENTS = ("colocated", "disaggregated")
ASYNC_MODES = ("off", "one-step")


def knob_pairs(knobs: Mapping[str, object]) -> list[str]:
    """`{"dp": 2, "tp": 1}` as the command line's `["dp=2", "tp=1"]`."""
    return [f"{k}={v}" for k, v in knobs.items()]


def knob_label(knobs: Mapping[str, object], empty: str = "defaults") -> str:
    """Knobs as one label, `dp=2 tp=1`, or `empty` when none is set: the one spelling every table uses."""
    return " ".join(knob_pairs(knobs)) or empty


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallelism:
    """Trainer GPUs = dp x sp x pp (the FSDP trainers rlbench drives have no trainer TP);
    the rollout engine's tensor-parallel groups of size tp divide those same GPUs when
    colocated, as in verl's hybrid engine and TRL's colocated vLLM."""

    dp: int = 1  # data parallel / FSDP degree of the trainer
    tp: int = 1  # tensor parallel size of the rollout engine (vLLM/SGLang)
    pp: int = 1  # pipeline parallel stages of the trainer
    sp: int = 1  # sequence parallel (Ulysses / ring attention) size
    placement: Literal["colocated", "disaggregated"] = "colocated"
    async_: Literal["off", "one-step"] = "off"  # spelled `async` on the command line

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "sp"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise RLBenchError(f"--parallel {name}={value!r}: must be a positive integer")
        if self.placement not in PLACEMENTS:
            raise RLBenchError(f"--parallel placement={self.placement!r}: must be one of {', '.join(PLACEMENTS)}")
        if self.async_ not in ASYNC_MODES:
            raise RLBenchError(f"--parallel async={self.async_!r}: must be one of {', '.join(ASYNC_MODES)}")

    @property
    def world_size(self) -> int:
        """GPUs the trainer spans (rollout engines may add more when disaggregated)."""
        return self.dp * self.sp * self.pp

    def non_default(self) -> dict[str, object]:
        """The knobs set away from their defaults, by command-line name."""
        default = Parallelism()
        return {_cli_name(f.name): getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    def to_dict(self) -> dict[str, object]:
        return {_cli_name(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}


def _cli_name(field_name: str) -> str:
    return field_name.rstrip("_")


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
            raise RLBenchError(f"--parallel {key}= is given twice ({seen[key]} and {pair.strip()}); give each knob once")
        seen[key] = pair.strip()
        if key in ("placement", "async"):
            values[key + ("_" if key == "async" else "")] = raw
        else:
            try:
                values[key] = int(raw)
            except ValueError:
                raise RLBenchError(f"--parallel {pair!r}: {key} must be a positive integer") from None
    return Parallelism(**values)


def splits_heads(n: int, heads: int, kv_heads: int) -> bool:
    """Whether n ranks can split a layer's attention: every rank n-th of the query heads, and the KV
    heads divided among them (kv_heads % n == 0) or each KV head copied to n/kv_heads ranks."""
    return heads % n == 0 and (kv_heads % n == 0 or n % kv_heads == 0)


def check_heads(parallel: Parallelism, arch: ModelArch | None, model: str) -> None:
    """Refuse, before anything launches, a tp or sp that cannot split the model's attention heads.

    The one check `run` (every adapter's `check`), `sweep` (through those checks) and `predict` make.
    tp: vLLM's tensor parallelism gives each rank heads/tp query heads and kv_heads/tp KV heads, or
    replicates KV heads when tp > kv_heads (vLLM `QKVParallelLinear`; it refuses other shapes at start-up).
    sp: verl's Ulysses all-to-all scatters heads the same way (`verl/utils/ulysses.py`, KV heads
    repeated to sp when fewer). OpenRLHF's ring attention splits the sequence instead, but the rule
    holds for every framework so that a layout is run by all of them or by none (equal work).
    `arch` None: the model's config was not found here, which refuses any tp or sp above 1.
    """
    splits = {name: n for name, n in (("tp", parallel.tp), ("sp", parallel.sp)) if n > 1}
    if not splits:
        return
    if arch is None:
        knobs = " ".join(f"{name}={n}" for name, n in splits.items())
        raise RLBenchError(f"--parallel {knobs}: cannot check it against the attention heads of model '{model}': "
                           "its config.json is not here (no local folder, not in the Hugging Face cache, not in "
                           f"rlbench's built-in table); fetch it first: huggingface-cli download {model} config.json")
    for name, n in splits.items():
        if splits_heads(n, arch.heads, arch.kv_heads):
            continue
        fits = [k for k in range(1, arch.heads + 1) if splits_heads(k, arch.heads, arch.kv_heads)]
        why = (f"{n} does not divide its {arch.heads} attention heads" if arch.heads % n else
               f"{n} neither divides its {arch.kv_heads} KV heads nor is a multiple of them")
        raise RLBenchError(f"--parallel {name}={n}: model {arch.name} ({arch.source or 'config'}): {why}, so "
                           f"{'vLLM cannot shard it' if name == 'tp' else 'Ulysses cannot scatter its heads'}; "
                           f"use {name} in {', '.join(map(str, fits))}")
