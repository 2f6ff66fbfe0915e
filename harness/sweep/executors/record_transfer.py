"""Carry a run's record folder from a Ray job back to the sweep, through the job's own log.

The job prints its finished record folder as a base64 tar.gz between two marker
lines; the sweep reads the job log through the job API and unpacks the last such
block into its own folder. This needs no shared filesystem and no extra service,
only the job API the sweep already talks to. Its cost: the whole record (with
`framework.log`) passes through the head node's job log, so records of hundreds of
MB would be slow; the sizes of benchmark records (KB to a few MB) are fine.

    python -c "from rlbench.harness.sweep.executors.record_transfer import pack; print(pack('results/<run_id>')[:80])"
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

BEGIN, END = "RLBENCH-RECORD-BEGIN", "RLBENCH-RECORD-END"
_WIDTH = 76


def pack(run_dir: Path) -> str:
    """The record folder as marker-framed base64 lines (the folder's name is the archive's top entry)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(run_dir, arcname=run_dir.name)
    text = base64.b64encode(buffer.getvalue()).decode()
    lines = [text[i : i + _WIDTH] for i in range(0, len(text), _WIDTH)]
    return "\n".join([f"{BEGIN} {run_dir.name}", *lines, END])


def strip_blocks(log: str) -> list[str]:
    """The log's lines without any record block (what a person reads)."""
    kept, inside = [], False
    for line in log.splitlines():
        if line.startswith(BEGIN):
            inside = True
        elif inside and line.startswith(END):
            inside = False
        elif not inside:
            kept.append(line)
    return kept


def unpack(log: str, dest: Path) -> Path | None:
    """Extract the last complete record block of `log` into `dest`; its folder, or None when there is none."""
    name, chunks, found = None, None, None
    for line in log.splitlines():
        if line.startswith(BEGIN):
            name, chunks = line[len(BEGIN) :].strip(), []
        elif chunks is not None and line.startswith(END):
            found, chunks = (name, "".join(chunks)), None
        elif chunks is not None:
            chunks.append(line.strip())
    if found is None:
        return None
    name, text = found
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=".incoming-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(text)), mode="r:gz") as archive:
            archive.extractall(staging, filter="data")  # refuses absolute paths and links out of staging
        target = dest / name
        os.rename(staging / name, target)  # fails rather than merge into an existing record
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)
