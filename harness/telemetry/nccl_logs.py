"""Read the per-process NCCL debug files a run wrote and parse them into one collectives table.

With `nccl_env(True, run_dir / "nccl")` NCCL writes `run_dir/nccl.<host>.<pid>`,
one file per process; this reads them all (in name order) and hands the lines
to the pure parser `rlbench.harness.telemetry.nccl.parse_nccl_log`.

    python -c "from pathlib import Path; from rlbench.harness.telemetry.nccl_logs import read_nccl_logs; \\
        print(read_nccl_logs(Path('runs/x/nccl')))"
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from rlbench.harness.telemetry.nccl import parse_nccl_log


def nccl_log_files(log_path: Path) -> list[Path]:
    """The files NCCL wrote for NCCL_DEBUG_FILE=`<log_path>.%h.%p`."""
    log_path = Path(log_path)
    if not log_path.parent.is_dir():
        return []
    return sorted(path for path in log_path.parent.glob(log_path.name + ".*") if path.is_file())


def _lines(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        with path.open(encoding="utf-8", errors="replace") as handle:
            yield from handle


def read_nccl_logs(log_path: Path, utc_offset_s: float | None = None) -> pd.DataFrame:
    """All NCCL calls logged by all processes of a run (empty table when NCCL logged nothing)."""
    return parse_nccl_log(_lines(nccl_log_files(log_path)), utc_offset_s=utc_offset_s)
