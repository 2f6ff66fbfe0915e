"""`rlbench compare`: two run records, metric by metric; exit 1 on a significant regression, 3 when too few
steps let the test decide nothing."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

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
    rlbench's wall step time instead (exit 3 when it cannot be decided). Two sweep folders of a workload with a
    quality target are compared on time to target over their seeds (a rank test; exit 3 when n cannot decide)."""
    from rlbench.harness.record.compare import (
        ACROSS_METRIC,
        across_verdict,
        compare_records,
        format_table,
        parse_threshold,
    )
    from rlbench.harness.record.read import read_run_json
    from rlbench.harness.record.sweep_index import INDEX_FILE

    if all((Path(path) / INDEX_FILE).is_file() for path in (baseline, candidate)):
        _compare_sweeps(Path(baseline), Path(candidate), accept_undecidable)
        return
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


def _compare_sweeps(baseline: Path, candidate: Path, accept_undecidable: bool) -> None:
    """Two sweeps' time to target over their seeds; exit 3 when their n cannot decide."""
    from rlbench.harness.record.compare import compare_sweep_targets, target_group
    from rlbench.harness.record.spread import target_text

    found, line = compare_sweep_targets(baseline, candidate)
    for path in (baseline, candidate):
        click.echo(f"{path}: {target_text(target_group(path)['target'])}")
    click.echo(line)
    if found["verdict"] == "undecidable" and not accept_undecidable:
        sys.exit(EXIT_UNDECIDABLE)
