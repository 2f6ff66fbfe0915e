"""Why a framework run failed, classified from evidence, with the log lines that show it.

OOM is claimed only with real evidence: out-of-memory text in the log (CUDA OOM,
MemoryError, std::bad_alloc), the kernel's OOM-kill counter rising during a run
whose process was SIGKILLed, or a SIGKILL while the process tree's memory was at
the machine's (or cgroup's) limit. Any other signal death is "killed by signal N";
an error exit is a framework error whose message is the log line with the error
(the exception line, not whatever the framework printed last) and whose tail is
the traceback around it.

    python -c "from pathlib import Path; from rlbench.harness.run.failure_cause import classify; \\
        print(classify(1, Path('results/<run_id>'), None)['message'])"
"""

from __future__ import annotations

import math
import re
import signal
from pathlib import Path
from typing import Any

import psutil

from rlbench.harness.run.stop_signals import describe

LOG_FILE = "framework.log"
TAIL_LINES = 30
SCAN_LINES = 3000  # how far back the error line is looked for (frameworks log a lot after dying: Ray, atexit)
OOM_TEXT = (
    "CUDA out of memory",
    "OutOfMemoryError",
    "MemoryError",
    "std::bad_alloc",
    "Cannot allocate memory",
    "out of memory",
)
AT_LIMIT = 0.9  # memory within 10% of the limit counts as "at the limit" (10 Hz samples miss the last climb)
_EXCEPTION = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit|Interrupt)\b(:|$)")
_ERRORISH = re.compile(r"Traceback|\bERROR\b|\berror\b|Error\b|FAILED|Killed|Segmentation fault|core dumped|Aborted")


def read_log(run_dir: Path, lines: int = SCAN_LINES) -> list[str]:
    path = run_dir / LOG_FILE
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def log_tail(run_dir: Path, lines: int = TAIL_LINES) -> list[str]:
    return read_log(run_dir, lines)


def error_excerpt(lines: list[str]) -> tuple[str | None, list[str]]:
    """The line that states the error (last exception line, else last error-looking line) and the lines
    around it: from its traceback's start (if near) to a few lines after; else the last TAIL_LINES."""
    index = next((i for i in range(len(lines) - 1, -1, -1) if _EXCEPTION.match(lines[i])), None)
    if index is None:
        index = next((i for i in range(len(lines) - 1, -1, -1) if _ERRORISH.search(lines[i])), None)
    if index is None:
        return None, lines[-TAIL_LINES:]
    start = max(0, index - TAIL_LINES + 6)
    traceback_start = next((i for i in range(index, max(-1, index - 80), -1) if lines[i].startswith("Traceback")), None)
    if traceback_start is not None:
        start = min(start, traceback_start)
    return lines[index].strip(), lines[start : index + 6]


def _read_int(path: Path, key: str) -> int | None:
    """`key N` from a cgroup/proc counter file, or None where the file or key is absent."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _cgroup_dirs() -> list[Path]:
    """This process's memory cgroup folders (v2 unified, v1 memory), plus the mount roots (a container's root)."""
    dirs: list[Path] = []
    try:
        entries = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return dirs
    for entry in entries:
        _, controllers, path = entry.split(":", 2)
        base = Path("/sys/fs/cgroup") if controllers == "" else Path("/sys/fs/cgroup/memory")
        if controllers == "" or "memory" in controllers.split(","):
            dirs += [base / path.lstrip("/"), base]
    return dirs


def oom_kill_count() -> int | None:
    """Kernel OOM kills so far: this cgroup's counter where readable, else the machine's (/proc/vmstat)."""
    for folder in _cgroup_dirs():
        count = _read_int(folder / "memory.events", "oom_kill")
        if count is None:
            count = _read_int(folder / "memory.oom_control", "oom_kill")
        if count is not None:
            return count
    return _read_int(Path("/proc/vmstat"), "oom_kill")


def memory_limit_gb() -> float:
    """The smaller of the machine's memory and this cgroup's limit (v2 memory.max, v1 limit_in_bytes)."""
    limit = psutil.virtual_memory().total
    for folder in _cgroup_dirs():
        for name in ("memory.max", "memory.limit_in_bytes"):
            try:
                limit = min(limit, int((folder / name).read_text().strip()))
            except (OSError, ValueError):  # "max", absent
                continue
    return limit / 1e9


def _peak_memory_share(telemetry: Path | None) -> float | None:
    """Peak share of the memory limit used, from the sampler's process tree and host readings."""
    if telemetry is None or not telemetry.is_file():
        return None
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(telemetry, columns=["proc_rss_gb", "host_mem_used_gb"]).to_pydict()
    except Exception:  # a damaged telemetry file is no evidence either way
        return None
    limit = memory_limit_gb()
    values = [v for v in table["proc_rss_gb"] + table["host_mem_used_gb"] if v is not None and math.isfinite(v)]
    return max(values) / limit if values and limit > 0 else None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify(
    returncode: int, run_dir: Path, oom_kills_before: int | None, telemetry: Path | None = None
) -> dict[str, Any]:
    """run.json's error entry {kind, message, log_tail, evidence} for a framework that exited non-zero."""
    lines = read_log(run_dir)
    error_line, tail = error_excerpt(lines)
    # Only where the error is (and the very end): a warning about memory earlier in the run is no evidence.
    region = tail + lines[-TAIL_LINES:]
    oom_line = next((line.strip() for line in reversed(region) if any(m in line for m in OOM_TEXT)), None)
    if oom_line is not None:
        return _entry("oom", oom_line, tail if error_line else lines[-TAIL_LINES:], "out-of-memory text in the log")
    if returncode < 0:
        signum = -returncode
        name = signal_name(signum)
        if signum == signal.SIGKILL:
            after = oom_kill_count()
            if oom_kills_before is not None and after is not None and after > oom_kills_before:
                return _entry(
                    "oom",
                    f"the framework was killed by {name}: the kernel OOM-killed "
                    f"{after - oom_kills_before} process(es) during the run",
                    lines[-TAIL_LINES:],
                    "kernel OOM-kill counter rose",
                )
            share = _peak_memory_share(telemetry)
            if share is not None and share >= AT_LIMIT:
                return _entry(
                    "oom",
                    f"the framework was killed by {name} with memory at {share:.0%} of its limit",
                    lines[-TAIL_LINES:],
                    "SIGKILL at the memory limit",
                )
        return _entry(
            "signal",
            f"the framework was killed by signal {signum} ({name})",
            lines[-TAIL_LINES:],
            "no out-of-memory evidence" if signum == signal.SIGKILL else None,
        )
    message = error_line or (
        f"the framework exited with code {returncode}" + ("; its log is empty" if not lines else "")
    )
    return _entry("framework_error", message, tail, None)


def _entry(kind: str, message: str, tail: list[str], evidence: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": kind, "message": message, "log_tail": tail}
    if evidence:
        entry["evidence"] = evidence
    return entry


def run_error(
    kind: str | None,
    returncode: int | None,
    signum: int | None,
    run_dir: Path,
    oom_kills_before: int | None,
    telemetry: Path | None = None,
) -> dict[str, Any] | None:
    """run.json's `error` for a framework process that ended as `kind` (framework_process.Outcome's; None: it
    succeeded): the framework's own failures classified from evidence, the runner's reasons with the log's tail."""
    if kind is None:
        return None
    if kind == "framework_error" and returncode:
        return classify(returncode, run_dir, oom_kills_before, telemetry)
    tail = log_tail(run_dir)
    if kind == "interrupted":
        signum = signum or signal.SIGINT
        return {
            "kind": "interrupted",
            "message": f"interrupted by {describe(signum)}",
            "signal": signal.Signals(signum).name,
            "log_tail": tail,
        }
    if kind == "timeout":
        return {"kind": "timeout", "message": "the framework ran past its timeout and was stopped", "log_tail": tail}
    if kind == "launch_error":
        return {
            "kind": "launch_error",
            "message": (tail or ["the framework could not be started"])[-1],
            "log_tail": tail,
        }
    # exited 0 without logging every step: not a complete benchmark
    return {
        "kind": "framework_error",
        "message": "the framework exited 0 but logged fewer steps than asked",
        "log_tail": tail,
    }
