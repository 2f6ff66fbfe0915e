"""Writing a run's trace (reports/trace.py) to a file: never inside the record, never over a file that is not a
trace, atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlbench.harness.atomic import write_bytes
from rlbench.harness.errors import RLBenchError
from rlbench.harness.out_dir import check_writable, unwritable
from rlbench.reports.load import load_run
from rlbench.reports.trace import build_trace, trace_summary


def write_trace(run: Path, out: Path | None) -> str:
    """Write the trace of the record at `run` to `out` (default `<run name>.trace.json` in the current folder);
    returns one line naming the file and what it holds."""
    loaded = load_run(Path(run))  # not a record, or a damaged one: its reader's one line
    out = Path(out) if out is not None else Path(f"{Path(run).resolve().name}.trace.json")
    record_dir = Path(run).resolve()
    if record_dir == out.absolute().parent.resolve() or record_dir in out.absolute().resolve().parents:
        raise RLBenchError(f"--out {out}: inside the run record {run}, which no command writes into; choose another")
    check_writable(out.absolute().parent)
    if out.is_file() and not _starts_a_trace(out):
        raise RLBenchError(f"--out {out}: exists and is not a trace, so writing there would destroy it; choose another")
    trace = build_trace(loaded)
    data = json.dumps(trace, allow_nan=False, separators=(",", ":")).encode()
    try:
        write_bytes(out, data)
    except OSError as exc:
        raise unwritable(out, exc, "--out") from None
    return f"{out} ({trace_summary(trace)}): open it in https://ui.perfetto.dev or chrome://tracing"


def _starts_a_trace(path: Path) -> bool:
    """Whether the file's first bytes are a trace's (what this command writes): read those only, never the file."""
    try:
        with path.open("rb") as handle:
            return handle.read(64).lstrip().startswith(b'{"traceEvents"')
    except OSError:
        return False
