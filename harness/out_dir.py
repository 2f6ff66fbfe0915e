"""Output folders of the commands that write files (report, nightly, run): one clear error for a bad one.

An `--out` under a regular file, on a read-only filesystem or where this user may not
write is refused before any work starts, as one `RLBenchError` naming the option, the
path, the reason and the fix, never an OSError traceback after the work is done.

    rlbench report results/ --out /read-only/report.html
    error: --out /read-only: cannot write there (Read-only file system); choose another --out
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rlbench.errors import RLBenchError


def _file_in_the_way(path: Path) -> Path | None:
    """The first of `path` and its ancestors that exists and is not a folder."""
    for candidate in [*reversed(path.parents), path]:
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return None


def unwritable(path: Path, exc: OSError, option: str) -> RLBenchError:
    """The one-line error for an OSError met while creating or writing under `path`."""
    blocker = _file_in_the_way(path)
    if blocker is not None:
        return RLBenchError(f"{option} {path}: {blocker} is a file, not a folder; choose another {option}")
    return RLBenchError(f"{option} {path}: cannot write there ({exc.strerror or exc}); choose another {option}")


def writable_folder(path: Path, option: str = "--out") -> Path:
    """Create `path` (with its parents) and prove a file can be created in it; returns it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):  # mkdir succeeds on a read-only mount when the folder exists
            pass
    except OSError as exc:
        raise unwritable(path, exc, option) from None
    return path
