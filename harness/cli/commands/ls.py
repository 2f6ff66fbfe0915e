"""`rlbench ls`: the frameworks (installed, version, usable here) and the workloads."""

from __future__ import annotations

import click

from rlbench.harness.errors import RLBenchError


@click.command(name="ls")
def ls() -> None:
    """List frameworks (installed, version, usable here) and workloads."""
    from rlbench.adapters.registry import available, get_adapter
    from rlbench.workloads.catalog import available_workloads, load_workload

    click.echo("frameworks:")
    for name in available():
        adapter = get_adapter(name)
        usable, why = adapter.usable_here()
        version = adapter.version() or "-"
        tested = (
            ""
            if not adapter.version() or adapter.version_is_tested()
            else f" (untested; tested: {adapter.tested_versions})"
        )
        click.echo(f"  {name:<10} {version:<10} {'usable' if usable else 'not usable'}: {why}{tested}")
    click.echo("workloads:")
    for name in available_workloads():
        try:
            w = load_workload(name)
            click.echo(f"  {name:<18} v{w.version}  {w.description}")
        except RLBenchError as exc:
            click.echo(f"  {name:<18} invalid: {exc}")
