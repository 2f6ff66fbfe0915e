"""`rlbench nightly`: the nightly matrix against its baseline; exit 1 on a regression or a failed run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from rlbench.harness.cli.user_errors import user_errors
from rlbench.harness.record.status import NightStatus


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Matrix, baseline folder, threshold: one file per framework environment (benchmarks/nightly-<env>.yaml).",
)
@click.option("--update-baseline", is_flag=True, help="After a clean night, copy its records into the baseline folder.")
@user_errors
def nightly(config_path: Path, update_baseline: bool) -> None:
    """Run the nightly matrix, compare with the baseline, write reports; exit 1 on regression or failure."""
    from rlbench.harness.nightly.config import load_nightly_config
    from rlbench.harness.nightly.gate import format_night, run_night

    night_dir, night = run_night(
        load_nightly_config(config_path), update_baseline=update_baseline, echo=lambda line: click.echo(line, err=True)
    )
    click.echo(format_night(night))
    click.echo(str(night_dir))
    if night["status"] != NightStatus.PASSED:
        sys.exit(1)
