"""rlbench's harness: the run orchestrator, the record, telemetry, the performance model, sweeps, nightly and
the `rlbench` command. `rlbench` is a namespace over the source folders: `rlbench.harness` (this folder),
`rlbench.adapters`, `rlbench.workloads`, `rlbench.reports`.

Importing this package imports no training framework; adapters load lazily.

    rlbench run --framework trl --workload gsm8k-grpo-tiny
"""

from __future__ import annotations

__version__ = "0.1.0"
