"""`rlbench calibrate`: a framework's per-step floor on this machine, measured with tiny real runs and cached."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from rlbench.harness.cli.options import out_folder
from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.option("--framework", required=True, help="Framework adapter to calibrate: see `rlbench ls`.")
@click.option(
    "--lengths",
    default="8,16",
    show_default=True,
    help="Response lengths of the calibration runs, comma-separated (two at least).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=2),
    default=16,
    show_default=True,
    help="RL steps per calibration run (up to 3 warm-up steps are left out).",
)
@out_folder("results/calibration", help="Folder that receives the calibration runs' records.")
@user_errors
def calibrate(framework: str, lengths: str, steps: int, out: Path) -> None:
    """Measure a framework's per-step floor here with tiny real runs; later predictions include it."""
    from rlbench.harness.out_dir import check_writable
    from rlbench.harness.sweep.calibrate import calibrate as run_calibration
    from rlbench.harness.sweep.calibrate import describe, parse_lengths

    check_writable(out)  # refused before the calibration runs, not when their records are written
    floor, cells, cache = run_calibration(
        framework, parse_lengths(lengths), steps=steps, out=out, echo=functools.partial(click.echo, err=True)
    )
    click.echo(describe(floor, cells))
    click.echo(str(cache))
