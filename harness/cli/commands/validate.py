"""`rlbench validate`: load and check a workload file and the data `run` would read for it."""

from __future__ import annotations

import click

from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.argument("workload")
@user_errors
def validate(workload: str) -> None:
    """Load and check a workload file (by name or path) and the data `run` would read for it."""
    from rlbench.workloads.catalog import load_workload
    from rlbench.workloads.prompts import render, shuffled, workload_problems

    w = load_workload(workload)
    split = workload_problems(w)  # what `run` reads first: the files exist, decode, are not empty
    render(w, shuffled(w, split, seed=0)[0])
    click.echo(
        f"ok: {w.name} v{w.version}: {w.algorithm.name} on {w.data.dataset}/{w.data.split} "
        f"({len(split.problems)} problems, {split.origin}: {split.location}), model {w.model.name}, "
        f"{w.prompts_per_step} prompts x {w.algorithm.group_size} responses per step, {w.steps} steps"
    )
