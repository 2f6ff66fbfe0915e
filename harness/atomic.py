"""Atomic file writes, the one way every record file is written.

The data goes to a hidden temporary file beside the target and is renamed onto
it, so a reader never sees half a file; on any failure (a full disk, a read-only
filesystem, Ctrl-C) the temporary file is removed, so no `.*.tmp` is left behind.
Imports only the standard library: the telemetry sampler uses it too.

    python -c "from pathlib import Path; from rlbench.harness.atomic import *; write_bytes(Path('x.txt'), b'hi')"
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path to write; renamed onto `path` when the block ends, removed if it raises."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, flushed to disk before the rename."""
    with replacing(path) as tmp, tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
