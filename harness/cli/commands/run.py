"""`rlbench run`: one benchmark run, its record written under --out; the figures on stderr, the path on stdout."""

from __future__ import annotations

from pathlib import Path

import click

from rlbench.harness.cli.options import SEED, STEPS, out_folder
from rlbench.harness.cli.user_errors import user_errors


@click.command()
@click.option("--framework", required=True, help="Framework adapter: see `rlbench ls`.")
@click.option("--workload", required=True, help="Workload name (see `rlbench ls`) or path to a YAML file.")
@click.option("--steps", type=STEPS, help="Override the workload's number of RL steps.")
@click.option(
    "--parallel",
    "parallel",
    multiple=True,
    metavar="KEY=VALUE",
    help="Parallelism knob, repeatable: dp, tp (trainer), rollout_tp, pp, pp_virtual, cp, ep, etp (expert tp), sp, "
    "placement=colocated|disaggregated, fuse=NAME|none, async=off|one-step|K, nodes=N, gpus_per_node=G "
    "(README's knob table).",
)
@click.option(
    "--ray-address",
    envvar="RAY_ADDRESS",
    metavar="HOST:PORT",
    help="Join this running Ray cluster (its head's GCS address; default $RAY_ADDRESS): verl's and OpenRLHF's "
    "drivers run against it, one rlbench agent per node samples it.",
)
@out_folder("results", help="Folder that receives one record folder per run.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed for data order, model init and sampling.")
@click.option("--dry-run", is_flag=True, help="Print the exact framework command and config; run nothing.")
@click.option(
    "--profile",
    metavar="torch|nsys",
    help="Switch on a profiler for --profile-steps through the framework's own mechanism where rlbench maps one "
    "(TRL: torch.profiler around the steps); its traces land in the record's profile/ folder.",
)
@click.option(
    "--profile-steps",
    metavar="A-B",
    help="The steps to profile, e.g. 3-4 (default: the first step after warm-up).",
)
@user_errors
def run(
    framework: str,
    workload: str,
    steps: int | None,
    parallel: tuple[str, ...],
    ray_address: str | None,
    out: Path,
    seed: int,
    dry_run: bool,
    profile: str | None,
    profile_steps: str | None,
) -> None:
    """Run one benchmark and write its record under --out."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.run.runner import dry_run as plan_only
    from rlbench.harness.run.runner import execute
    from rlbench.harness.run.stop_signals import stop_signals
    from rlbench.harness.spec.runspec import build_run_spec

    with stop_signals():  # SIGTERM/SIGHUP too, from here to the end of the record (the runner shares them)
        get_adapter(framework)  # an unknown framework is reported before the workload is read
        spec = build_run_spec(
            framework,
            workload,
            parallel,
            steps=steps,
            seed=seed,
            out=out,
            ray_address=ray_address,
            profile=profile,
            profile_steps=profile_steps,
        )
        if dry_run:
            click.echo(plan_only(spec, echo=lambda line: click.echo(line, err=True)))
            return
        run_dir = execute(spec, echo=lambda line: click.echo(line, err=True))
    from rlbench.reports.headline import headline

    for line in headline(run_dir):  # the figures on stderr; stdout stays the record's path alone
        click.echo(line, err=True)
    click.echo(str(run_dir))
