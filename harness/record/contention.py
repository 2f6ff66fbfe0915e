"""Was the host shared while a run's steps ran? From the record alone: the host's system-wide CPU minus the
framework's process tree, in cores, during the post-warm-up steps.

A step time measured beside other work is not comparable with one measured alone: `rlbench compare` marks a
contended record, `rlbench nightly` marks its benchmark and refuses to promote a contended night to the
baseline, and the report lists it under measurement hygiene (reports/hygiene.py).

    python -c "from rlbench.harness.record.read import read_record; \
        from rlbench.harness.record.contention import contention; print(contention(read_record('runs/x')))"
"""

from __future__ import annotations

import math
from typing import Any

# Other processes using half a core or more beside the framework: enough to move a 2-core CPU run by tens of
# percent (seen: a trainer given 35-40% of a core on a loaded host had steps varying 5x).
CONTENDED_CORES = 0.5


def _median(summary: dict[str, Any], name: str) -> float | None:
    value = (summary.get(name) or {}).get("median")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def other_cpu_cores(record: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(other processes' cores, host CPU %, framework cores) over the steps' medians; None where unknown."""
    summary = record.get("summary") or {}
    host, proc = _median(summary, "cpu_util_mean_pct"), _median(summary, "proc_cpu_util_mean_pct")
    cores = (record.get("environment") or {}).get("cpu_count")
    if host is None or proc is None or not cores:
        return None, host, None if proc is None else proc / 100
    return max(0.0, host / 100 * cores - proc / 100), host, proc / 100


def contention(record: dict[str, Any]) -> str | None:
    """One line saying the host was shared during the steps, or None (not contended, or not known)."""
    other, host, framework = other_cpu_cores(record)
    if other is None or other < CONTENDED_CORES:
        return None
    cores = (record.get("environment") or {}).get("cpu_count")
    return (
        f"host contended: other processes used {other:.1f} of {cores} cores during the steps "
        f"(host CPU {host:.0f}%, the framework {framework:.1f} cores); its times are not comparable"
    )
