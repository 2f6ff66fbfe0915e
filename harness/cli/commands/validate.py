"""`rlbench validate`: load and check a workload file, the data `run` would read for it, and the prompts it would
keep (rendered, tokenized, filtered by max_prompt_length), launching nothing."""

from __future__ import annotations

import click

from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.argument("workload")
@user_errors
def validate(workload: str) -> None:
    """Load and check a workload file (by name or path) and the data `run` would read for it."""
    from rlbench.harness.spec.inputs import prepare_inputs
    from rlbench.workloads.catalog import load_workload
    from rlbench.workloads.prompts import workload_problems
    from rlbench.workloads.tail import declared_lengths

    w = load_workload(workload)
    split = workload_problems(w)  # what `run` reads first: the files exist, decode, are not empty
    # Then what `run` does with them before launch, the prompt-length filter included (it refused workloads
    # validate said were ok); what cannot be checked here (a hub tokenizer offline) is said, not refused.
    prepare_inputs(w, seed=0, note=lambda line: click.echo(f"note: {line}", err=True))
    click.echo(
        f"ok: {w.name} v{w.version}: {w.algorithm.name} on {w.data.dataset}/{w.data.split} "
        f"({len(split.problems)} problems, {split.origin}: {split.location}), model {w.model.name}, "
        f"{w.prompts_per_step} prompts x {w.algorithm.group_size} responses per step, {w.steps} steps"
    )
    declared = declared_lengths(w)
    if declared:  # a tail workload: the distribution every framework samples
        click.echo(
            f"lengths: geometric, end probability {declared['end_probability']:g} per token: mean "
            f"{declared['mean']:.1f}, p50 {declared['p50']}, p90 {declared['p90']}, p99 {declared['p99']} tokens, "
            f"cap {declared['cap']} ({declared['clipped_share']:.1%} clipped)"
        )
