"""`rlbench compare`: two run records, metric by metric; exit 1 on a significant regression, 3 when too few
steps let the test decide nothing."""

from __future__ import annotations

import functools
import sys

import click

from rlbench.harness.cli.user_errors import user_errors

# Too few post-warm-up steps for the test to reach its level: neither a pass (0) nor a regression (1).
EXIT_UNDECIDABLE = 3


@click.command()
@click.argument("baseline")
@click.argument("candidate")
@click.option("--threshold", default="5%", show_default=True, help="Smallest change that counts (e.g. 5% or 0.05).")
@click.option(
    "--accept-undecidable",
    is_flag=True,
    help="Exit 0 when too few or too noisy steps leave a metric undecidable or inconclusive (default: exit 3).",
)
@user_errors
def compare(baseline: str, candidate: str, threshold: str, accept_undecidable: bool) -> None:
    """Compare two run records; exit 1 when a metric regresses significantly beyond --threshold, 3 when too few
    steps let the test decide nothing. Records of two frameworks on one workload, data and layout get a verdict on
    rlbench's wall step time instead (exit 3 when it cannot be decided)."""
    from rlbench.harness.record.compare import (
        ACROSS_METRIC,
        across_verdict,
        compare_records,
        format_table,
        parse_threshold,
    )
    from rlbench.harness.record.read import read_run_json

    results = compare_records(
        baseline, candidate, parse_threshold(threshold), notice=functools.partial(click.echo, err=True)
    )
    click.echo(format_table(results))
    names = [read_run_json(path)["framework"]["name"] for path in (baseline, candidate)]
    if names[0] != names[1]:  # two frameworks: a verdict on the one step-time definition, no regression gate
        click.echo(across_verdict(results, names[0], names[1]))
        headline = dict(results).get(ACROSS_METRIC)
        if not accept_undecidable and (headline is None or headline.verdict in ("undecidable", "inconclusive")):
            sys.exit(EXIT_UNDECIDABLE)
        return
    regressed = [name for name, c in results if c.verdict == "regressed"]
    if regressed:
        click.echo(f"regressed: {', '.join(regressed)}")
        sys.exit(1)
    if not accept_undecidable and any(c.verdict in ("undecidable", "inconclusive") for _, c in results):
        sys.exit(EXIT_UNDECIDABLE)
