"""Output folders of the commands that write files (report, nightly, run): one clear error for a bad one.

An `--out` under a regular file, on a read-only filesystem or where this user may not
write is refused before any work starts, as one `RLBenchError` naming the option, the
path, the reason and the fix, never an OSError traceback after the work is done.

    rlbench report results/ --out /read-only/report.html
    error: --out /read-only: cannot write there (Read-only file system); choose another --out
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from rlbench.harness.errors import RLBenchError


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


def check_writable(path: Path, option: str = "--out") -> Path:
    """Refuse a folder that could not be created or written, creating nothing (a refused command leaves no trace)."""
    path = Path(path).absolute()
    blocker = _file_in_the_way(path)
    if blocker is not None:
        raise RLBenchError(f"{option} {path}: {blocker} is a file, not a folder; choose another {option}")
    existing = next(p for p in [path, *path.parents] if p.exists())
    if os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise RLBenchError(f"{option} {path}: cannot write there (Read-only file system); choose another {option}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RLBenchError(
            f"{option} {path}: cannot write there ({existing}: Permission denied); choose another {option}"
        )
    return path


def writable_folder(path: Path, option: str = "--out") -> Path:
    """Create `path` (with its parents) and prove a file can be created in it; returns it."""
    path = check_writable(path, option)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):  # e.g. a full disk, which the checks above cannot see
            pass
    except OSError as exc:
        raise unwritable(path, exc, option) from None
    return path


def check_replaceable_page(path: Path, option: str = "--out") -> None:
    """Refuse to write a page over a file that is not one: a record's run.json, a steps table, a config (an
    `--out` pointing into a record folder would lose the record). An earlier HTML page may be replaced."""
    if not Path(path).is_file():
        return
    try:
        with open(path, "rb") as handle:
            head = handle.read(512).lstrip().lower()
    except OSError:
        return  # cannot be read: the write itself will say why
    if not (head.startswith(b"<!doctype html") or head.startswith(b"<html")):
        raise RLBenchError(
            f"{option} {path}: exists and is not an HTML page, so writing the report there would destroy it; "
            f"choose a new file, e.g. {option} report.html"
        )
