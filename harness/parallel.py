"""Parallelism settings of a run: the `--parallel key=value` knobs, parsed and checked.

The knobs are framework-neutral; each adapter maps the ones it supports onto its
framework's own configuration and refuses the others before anything launches.

    rlbench run --framework trl --workload gsm8k-grpo --parallel dp=8 --parallel tp=2
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Literal

from rlbench.errors import RLBenchError

PLACEMENTS = ("colocated", "disaggregated")
ASYNC_MODES = ("off", "one-step")


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
        if key in ("placement", "async"):
            values[key + ("_" if key == "async" else "")] = raw
        else:
            try:
                values[key] = int(raw)
            except ValueError:
                raise RLBenchError(f"--parallel {pair!r}: {key} must be a positive integer") from None
    return Parallelism(**values)
