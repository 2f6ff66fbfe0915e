"""`rlbench trace`: one run record as a Chrome trace-event JSON, to open in Perfetto's UI or chrome://tracing."""

from __future__ import annotations

from pathlib import Path

import click

from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The trace file to write (default: <run folder name>.trace.json here); never inside the record.",
)
@user_errors
def trace(run: Path, out: Path | None) -> None:
    """Write RUN's steps, stages, telemetry counters and NCCL collectives as a Chrome trace-event JSON."""
    from rlbench.reports.trace_file import write_trace

    click.echo(write_trace(run, out))
