"""Profiler pipeline: host/GPU telemetry sampling, per-step energy, NCCL collectives, cost metrics.

Runner side (I/O): `start_sampler` / `SamplerHandle.stop` (a separate sampler
process writing `telemetry.parquet`), `nccl_env` (environment so NCCL logs its
calls) and `read_nccl_logs`. Analysis side (pure, tables in, tables out):
`per_step_telemetry`, `energy_from_power`, `per_node_summary`, `idle_nodes`,
`parse_nccl_log`, `summarize_collectives`, `energy_per_mtok_j`, `cost_per_mtok_usd`.

    handle = start_sampler(run_dir / "telemetry.parquet", root_pid=os.getpid())
    ...run the framework with env={**os.environ, **nccl_env(profile, run_dir / "nccl")}...
    per_step = per_step_telemetry(pd.read_parquet(handle.stop()), steps)
"""

from __future__ import annotations

import importlib
from typing import Any

# Lazy, so that the sampler process (`python -m rlbench.harness.telemetry.sample_loop`) does not
# pay for importing pandas: it needs only psutil, nvidia-ml-py and, at the end, pyarrow.
_EXPORTS = {
    "SamplerHandle": "sampler",
    "start_sampler": "sampler",
    "energy_from_power": "align",
    "per_step_telemetry": "align",
    "idle_nodes": "nodes",
    "per_node_summary": "nodes",
    "cost_per_mtok_usd": "costs",
    "energy_per_mtok_j": "costs",
    "nccl_env": "nccl",
    "parse_nccl_log": "nccl",
    "summarize_collectives": "nccl",
    "read_nccl_logs": "nccl_logs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlbench.harness.telemetry' has no attribute {name!r}")
    return getattr(importlib.import_module(f"rlbench.harness.telemetry.{_EXPORTS[name]}"), name)
