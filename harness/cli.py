"""The `rlbench` command line: run, ls, validate.

User mistakes (`RLBenchError`) print one line, `error: <problem and fix>`, and
exit 2 with no traceback; Ctrl-C exits 130 with the partial record kept.
New knobs go into workload files or `--parallel key=value`, not new flags.

    rlbench run --framework trl --workload gsm8k-grpo-tiny
    rlbench ls
    rlbench validate gsm8k-grpo
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click

from rlbench.errors import RLBenchError

DEFAULT_TIMEOUT_S = 7200.0


def _user_errors(fn):
    """Turn RLBenchError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rlbench.runner import RunInterrupted

        try:
            return fn(*args, **kwargs)
        except RunInterrupted as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(130)
        except RLBenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("error: interrupted before the framework started; nothing was recorded", err=True)
            sys.exit(130)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rlbench")
def main() -> None:
    """Benchmark RL-for-LLM training frameworks on equal work."""


@main.command()
@click.option("--framework", required=True, help="Framework adapter: see `rlbench ls`.")
@click.option("--workload", required=True, help="Workload name (see `rlbench ls`) or path to a YAML file.")
@click.option("--steps", type=click.IntRange(min=1), help="Override the workload's number of RL steps.")
@click.option("--parallel", "parallel", multiple=True, metavar="KEY=VALUE",
              help="Parallelism knob, repeatable: dp, tp, pp, sp, placement=colocated|disaggregated, async=off|one-step.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("results"), show_default=True,
              help="Folder that receives one record folder per run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for data order, model init and sampling.")
@click.option("--dry-run", is_flag=True, help="Print the exact framework command and config; run nothing.")
@_user_errors
def run(framework: str, workload: str, steps: int | None, parallel: tuple[str, ...], out: Path, seed: int,
        dry_run: bool) -> None:
    """Run one benchmark and write its record under --out."""
    from rlbench.parallel import parse_parallel
    from rlbench.runner import dry_run as plan_only
    from rlbench.runner import execute
    from rlbench.runspec import RunSpec
    from rlbench.workloads.catalog import load_workload

    from rlbench.adapters.registry import get_adapter

    get_adapter(framework)  # an unknown framework is reported before the workload is read
    loaded = load_workload(workload)
    spec = RunSpec(framework=framework, workload=loaded.with_steps(steps) if steps else loaded,
                   parallel=parse_parallel(parallel), seed=seed, out=out,
                   timeout_s=float(os.environ.get("RLBENCH_RUN_TIMEOUT_S", DEFAULT_TIMEOUT_S)))
    if dry_run:
        click.echo(plan_only(spec))
        return
    run_dir = execute(spec, echo=lambda line: click.echo(line, err=True))
    click.echo(str(run_dir))


@main.command(name="ls")
def list_command() -> None:
    """List frameworks (installed, version, usable here) and workloads."""
    from rlbench.adapters.registry import available, get_adapter
    from rlbench.workloads.catalog import available_workloads, load_workload

    click.echo("frameworks:")
    for name in available():
        adapter = get_adapter(name)
        usable, why = adapter.usable_here()
        version = adapter.version() or "-"
        tested = "" if not adapter.version() or adapter.version_is_tested() else f" (untested; tested: {adapter.tested_versions})"
        click.echo(f"  {name:<10} {version:<10} {'usable' if usable else 'not usable'}: {why}{tested}")
    click.echo("workloads:")
    for name in available_workloads():
        try:
            w = load_workload(name)
            click.echo(f"  {name:<18} v{w.version}  {w.description}")
        except RLBenchError as exc:
            click.echo(f"  {name:<18} invalid: {exc}")


@main.command()
@click.argument("workload")
@_user_errors
def validate(workload: str) -> None:
    """Load and check a workload file (by name or path)."""
    from rlbench.workloads.catalog import load_workload

    w = load_workload(workload)
    click.echo(f"ok: {w.name} v{w.version}: {w.algorithm.name} on {w.data.dataset}/{w.data.split}, model {w.model.name}, "
               f"{w.prompts_per_step} prompts x {w.algorithm.group_size} responses per step, {w.steps} steps")


if __name__ == "__main__":
    main()
