"""Options several commands share, declared once."""

from __future__ import annotations

import math
from pathlib import Path

import click

from rlbench.harness.spec.runspec import MAX_SEED
from rlbench.workloads.spec import MAX_STEPS

# Whole-number options with the bound in their message (click prints the range): a run's steps as a workload's
# (workloads/spec.py MAX_STEPS), and a seed numpy and torch both take (runspec.MAX_SEED).
STEPS = click.IntRange(min=1, max=MAX_STEPS)
SEED = click.IntRange(min=0, max=MAX_SEED)


def finite_non_negative(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A price or rate that is a number at all: NaN and infinity pass click's FloatRange, so refuse them here."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value!r} is not a finite number >= 0", ctx=ctx, param=param)
    return value


def out_folder(default: str, help: str):
    """`--out FOLDER`: where a command writes its record folders."""
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(default),
        show_default=True,
        help=help,
    )
