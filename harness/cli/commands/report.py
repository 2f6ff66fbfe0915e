"""`rlbench report`: run records (folders, or results folders holding them) into one self-contained HTML file."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write (self-contained, opens offline).",
)
@click.option("--history", is_flag=True, help="Show each metric over nights with detected change points.")
@click.option("--threshold", default="5%", show_default=True, help="With --history: smallest change that counts.")
@user_errors
def report(results: tuple[Path, ...], out: Path, history: bool, threshold: str) -> None:
    """Render run records (folders, or results folders holding them) into one HTML report."""
    from rlbench.harness.record.compare import parse_threshold
    from rlbench.reports.html import render_report

    click.echo(
        str(
            render_report(
                list(results),
                out,
                history=history,
                threshold=parse_threshold(threshold),
                warn=functools.partial(click.echo, err=True),
            )
        )
    )
