"""Options several commands share, declared once."""

from __future__ import annotations

from pathlib import Path

import click


def out_folder(default: str, help: str):
    """`--out FOLDER`: where a command writes its record folders."""
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(default),
        show_default=True,
        help=help,
    )
