"""`rlbench sweep`: a grid of runs, one record each plus the sweep's index; exit 1 if a run failed."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from rlbench.harness.cli.options import SEED, STEPS, out_folder
from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.option("--framework", help="Framework adapters, comma-separated: verl,openrlhf,trl.")
@click.option("--workload", help="Workloads (names or YAML paths), comma-separated.")
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="KNOB=V1,V2",
    help="Sweep a --parallel knob over values, repeatable: the grid is their product.",
)
@click.option("--parallel", "parallel", multiple=True, metavar="KEY=VALUE", help="A knob fixed for every run.")
@click.option("--steps", type=STEPS, help="Override the workloads' number of RL steps.")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of each configuration (reported with their spread).",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of every run (repeats share it).")
@click.option(
    "--vary-seed",
    is_flag=True,
    help="Repeat r runs with seed + r - 1: time to a workload's target scored over seeds (MLPerf-style).",
)
@out_folder("results", help="Folder that receives the sweep folder (index and one record per run).")
@click.option(
    "--executor",
    "executor_kind",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: one run after another here; ray: each run a job on a Ray cluster.",
)
@click.option(
    "--ray-address", help="Ray dashboard (job API) address, e.g. http://127.0.0.1:8265 (default $RAY_ADDRESS)."
)
@click.option(
    "--env",
    "envs",
    multiple=True,
    metavar="FRAMEWORK=VIRTUALENV",
    help="Run that framework's cells in its own virtualenv (e.g. verl=.nox/verl_cpu), repeatable.",
)
@click.option(
    "--resume",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue an interrupted sweep folder: runs only the cells not finished.",
)
@user_errors
def sweep(
    out: Path, executor_kind: str, ray_address: str | None, envs: tuple[str, ...], resume: Path | None, **grid_options
) -> None:
    """Run a grid of benchmarks, one record per run plus a sweep index; exit 1 if a run failed."""
    from rlbench.harness.record.spread import format_summary, refusals
    from rlbench.harness.record.sweep_index import load_index
    from rlbench.harness.sweep import driver as sweeps
    from rlbench.harness.sweep.executors import make_executor
    from rlbench.harness.sweep.executors.executor import sigterm_as_ctrl_c

    request = sweeps.request_from_options(resume=resume, **grid_options)  # --framework ... --repeats, by name
    executor = make_executor(executor_kind, ray_address, envs)
    sigterm_as_ctrl_c()  # `kill` stops the current run cleanly, like Ctrl-C
    sweep_dir = sweeps.open_sweep(request, executor, out, resume)
    echo = functools.partial(click.echo, err=True)
    index = load_index(sweep_dir)
    echo(f"sweep {sweep_dir}: {len(index['cells'])} cells, {sweeps.cells_to_run(index)} to run")
    for line in refusals(index):
        echo(f"  {line}")
    try:
        index = sweeps.run(sweep_dir, executor, echo)
    except sweeps.SweepInterrupted:
        click.echo(format_summary(load_index(sweep_dir)))
        raise
    click.echo(format_summary(index))
    report = sweeps.final_report(sweep_dir, index, echo)
    if report is not None:
        click.echo(f"report: {report}")
    click.echo(str(sweep_dir))
    if not sweeps.succeeded(index):
        sys.exit(1)
