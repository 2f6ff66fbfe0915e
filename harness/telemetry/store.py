"""Crash-safe files for the sampler: an append-only journal while sampling, the parquet at stop.

While sampling, rows are appended every `flush_every_s` to `<out>.partial.jsonl`
(one JSON object per line; a line torn by a crash is skipped on reading). At stop
the journal and the in-memory tail become `<out>`, written under a hidden
temporary name and renamed into place, so nobody ever sees half a parquet file;
then the journal is removed. The sampler thus never imports pyarrow (which pulls
in pandas, about a second of CPU) until the run is over. After a crash,
`combine_parts(out)` rebuilds `<out>` from the journal.

    python -c "from pathlib import Path; from rlbench.harness.telemetry.store import combine_parts; \\
        print(combine_parts(Path('runs/x/telemetry.parquet')))"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlbench.harness.atomic import replacing, write_bytes
from rlbench.harness.telemetry.columns import arrow_schema


def journal_file(out_file: Path) -> Path:
    return out_file.with_name(out_file.name + ".partial.jsonl")


def notes_file(out_file: Path) -> Path:
    """`telemetry.parquet` -> `telemetry.notes.json`."""
    return out_file.with_name(out_file.stem + ".notes.json")


def append_rows(rows: list[dict[str, Any]], out_file: Path) -> None:
    """Append rows to the journal (no fsync: it guards against a killed process, not a power cut)."""
    with journal_file(out_file).open("a", encoding="utf-8") as journal:
        journal.writelines(json.dumps(row) + "\n" for row in rows)


def read_journal(out_file: Path) -> list[dict[str, Any]]:
    path = journal_file(out_file)
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as journal:
        for line in journal:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # the last line of a crashed sampler
    return rows


def combine_parts(out_file: Path, tail: list[dict[str, Any]] | None = None) -> Path | None:
    """Write the journal plus `tail` as `out_file`; None when there is neither."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if tail is None and not journal_file(out_file).exists():
        return None
    rows = read_journal(out_file) + (tail or [])
    # from_pylist fills the keys a row lacks (the other source's columns) with nulls
    table = pa.Table.from_pylist(rows, schema=arrow_schema())
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out_file) as temporary:
        pq.write_table(table, temporary)
    journal_file(out_file).unlink(missing_ok=True)
    return out_file


def add_rows(out_file: Path, rows: list[dict[str, Any]]) -> Path | None:
    """`out_file` with `rows` added (another sampler's, e.g. a cluster node's), rewritten atomically; None when
    neither exists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(out_file).cast(arrow_schema())] if out_file.exists() else []
    if rows:
        tables.append(pa.Table.from_pylist(rows, schema=arrow_schema()))
    if not tables:
        return None
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with replacing(out_file) as temporary:
        pq.write_table(pa.concat_tables(tables), temporary)
    return out_file


def write_notes(path: Path, data: dict[str, Any]) -> Path:
    """The sampler's notes beside its parquet (path first, as record.store.write_json takes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    return path
