"""Where a framework's measured per-step floor lives on this machine, and how runs find it.

`rlbench calibrate --framework trl` measures the floor (perfmodel/floor.py) and saves it
here, one JSON file per framework in `$RLBENCH_CACHE` (default ~/.cache/rlbench), keyed like
the CPU probe: a floor is valid only for the framework version, device, thread count, torch
version and probe version it was measured with; anything else changed and it is ignored (and
`rlbench predict --framework` says to calibrate again).

    save_floor("trl", floor, cells)
    floor, why_not = load_floor("trl")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlbench.harness.atomic import write_bytes
from rlbench.harness.perfmodel import FrameworkFloor

FLOOR_VERSION = 6  # bump when the model under the floor changes, so old floors are re-measured
# (2: fp32 shape; 3: decode KV traffic; 4: the padded prompt width; 5: every logged stage and the unstaged time)


def floor_file(framework: str) -> Path:
    from rlbench.harness.settings import cache_root

    return cache_root() / f"floor-{framework}.json"


def machine_key(framework: str) -> dict[str, Any]:
    """What a floor depends on: the framework's version and the machine it runs on."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.predict.cpu_probe import PROBE_VERSION
    from rlbench.harness.spec.environment import cpu_model, gpus, package_version

    found = gpus()[0]
    key: dict[str, Any] = {
        "framework": framework,
        "framework_version": get_adapter(framework).version(),
        "floor_version": FLOOR_VERSION,
        "torch": package_version("torch"),
    }
    if found:
        return key | {"device": found[0]["name"]}
    import torch

    # The CPU row's peaks and latency enter the predicted side of every calibration cell.
    return key | {"device": cpu_model(), "threads": torch.get_num_threads(), "probe_version": PROBE_VERSION}


def save_floor(framework: str, floor: FrameworkFloor, cells: list[dict[str, Any]]) -> Path:
    """Write the floor and the calibration cells it came from, atomically (a crash leaves the old file)."""
    path = floor_file(framework)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(
        path, json.dumps({**machine_key(framework), "floor": floor.to_dict(), "cells": cells}, indent=2).encode()
    )
    return path


def load_floor(framework: str) -> tuple[FrameworkFloor | None, str]:
    """(the cached floor, "") when one matches this machine, else (None, why not and the fix)."""
    path = floor_file(framework)
    fix = f"run `rlbench calibrate --framework {framework}`"
    if not path.is_file():
        return None, f"no framework floor for {framework} on this machine ({fix})"
    try:
        cached = json.loads(path.read_text())
        floor = FrameworkFloor.from_dict(cached["floor"])
    except (ValueError, KeyError, TypeError):
        return None, f"{path} is unreadable ({fix})"
    stale = [k for k, v in machine_key(framework).items() if cached.get(k) != v]
    if stale:
        return None, f"the framework floor in {path} was measured with another {', '.join(stale)} ({fix})"
    return floor, ""
