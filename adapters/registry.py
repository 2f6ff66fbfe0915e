"""Lazy registry of framework adapters: name -> "module:Class".

Adapters are imported only when asked for by name, so `import rlbench` and
`rlbench --help` import no framework (lm-evaluation-harness registers models the
same way). A misspelt name gets the nearest one suggested.
"""

from __future__ import annotations

import difflib
import importlib

from rlbench.adapters.base import Adapter, LaneAdapter
from rlbench.harness.errors import RLBenchError

ADAPTERS: dict[str, str] = {
    "openrlhf": "rlbench.adapters.openrlhf.adapter:OpenRLHFAdapter",
    "trl": "rlbench.adapters.trl.adapter:TRLAdapter",
    "verl": "rlbench.adapters.verl.adapter:VerlAdapter",
}


def available() -> list[str]:
    return sorted(ADAPTERS)


def get_adapter(name: str) -> Adapter:
    if name not in ADAPTERS:
        close = difflib.get_close_matches(name, ADAPTERS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise RLBenchError(f"unknown framework '{name}'; {hint}available: {', '.join(available())}")
    module_name, class_name = ADAPTERS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


def lanes() -> list[str]:
    """The frameworks with a CPU lane: those whose adapter declares one (a `LaneAdapter`)."""
    return [name for name in available() if isinstance(get_adapter(name), LaneAdapter)]
