"""`rlbench compare`: two run records, metric by metric; exit 1 on a significant regression, 3 when too few
steps let the test decide nothing. Sweep folders are compared on time to target over their seeds: two sweeps,
or the configurations of one sweep with each other."""

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
@click.argument("candidate", required=False)
@click.option("--threshold", default="5%", show_default=True, help="Smallest change that counts (e.g. 5% or 0.05).")
@click.option(
    "--accept-undecidable",
    is_flag=True,
    help="Exit 0 when too few or too noisy steps leave a metric undecidable or inconclusive (default: exit 3).",
)
@user_errors
def compare(baseline: str, candidate: str | None, threshold: str, accept_undecidable: bool) -> None:
    """Compare two run records; exit 1 when a metric regresses significantly beyond --threshold, 3 when too few
    steps let the test decide nothing. Records of two frameworks on one workload, data and layout get a verdict on
    rlbench's wall step time instead (exit 3 when it cannot be decided). Two sweep folders of a workload with a
    quality target are compared on time to target over their seeds (a rank test; exit 3 when n cannot decide);
    one sweep folder alone compares each pair of its configurations that way."""
    from rlbench.harness.errors import RLBenchError
    from rlbench.harness.record.compare import (
        ACROSS_METRIC,
        across_verdict,
        compare_records,
        format_table,
        parse_threshold,
    )
    from rlbench.harness.record.read import read_run_json
    from rlbench.harness.record.sweep_index import INDEX_FILE

    if candidate is None:
        if not (Path(baseline) / INDEX_FILE).is_file():
            raise RLBenchError(
                f"{baseline} is not a sweep folder (no {INDEX_FILE}): compare takes two run records, two sweep "
                "folders, or one sweep folder whose configurations it compares with each other"
            )
        _compare_within(Path(baseline), accept_undecidable)
        return
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
    from rlbench.harness.record.spread import target_text
    from rlbench.harness.record.target_compare import compare_sweep_targets

    base, cand, found = compare_sweep_targets(baseline, candidate)
    for path, group in ((baseline, base), (candidate, cand)):
        click.echo(f"{path}: {target_text(group['target'])}")
    click.echo(found["line"])
    if found["verdict"] == "undecidable" and not accept_undecidable:
        sys.exit(EXIT_UNDECIDABLE)


def _compare_within(sweep: Path, accept_undecidable: bool) -> None:
    """Each pair of one sweep's configurations on time to target; exit 3 when any pair's n cannot decide."""
    from rlbench.harness.record.spread import cell_label, target_text
    from rlbench.harness.record.target_compare import compare_within_sweep

    groups, pairs = compare_within_sweep(sweep)
    for group in groups:
        click.echo(f"{cell_label(group)}: {target_text(group['target'])}")
    for pair in pairs:
        click.echo(pair["line"])
    if any(p["verdict"] == "undecidable" for p in pairs) and not accept_undecidable:
        sys.exit(EXIT_UNDECIDABLE)
