"""Lookup of a built-in table row by name, with a did-you-mean error on a miss.

Shared by the model-architecture and hardware tables so that both fail the same way:

    from rlbench.harness.perfmodel import get_hardware
    get_hardware("H10")
    # RLBenchError: unknown hardware 'H10'; did you mean 'H100-SXM'? available: A100-40GB, ...
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TypeVar

from rlbench.harness.errors import RLBenchError

T = TypeVar("T")


def normalize(name: str) -> str:
    """Case- and punctuation-insensitive key: 'Qwen/Qwen2.5-7B-Instruct' -> 'qwen2.57binstruct'."""
    tail = name.strip().rsplit("/", 1)[-1]
    return "".join(ch for ch in tail.lower() if ch.isalnum() or ch == ".")


def lookup(table: Mapping[str, T], name: str, kind: str, aliases: Mapping[str, str] | None = None) -> T:
    """Return `table[name]` matched loosely; raise RLBenchError naming the nearest key."""
    index = {normalize(key): key for key in table}
    for alias, key in (aliases or {}).items():
        index.setdefault(normalize(alias), key)
    hit = index.get(normalize(name))
    if hit is not None:
        return table[hit]
    close = difflib.get_close_matches(normalize(name), list(index), n=1, cutoff=0.5)
    hint = f"did you mean '{index[close[0]]}'? " if close else ""
    raise RLBenchError(f"unknown {kind} '{name}'; {hint}available: {', '.join(sorted(table))}")
