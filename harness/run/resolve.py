"""Phase 1 of a run, resolve: everything refusable is refused here, before any record exists.

The adapter refuses what its framework or this machine cannot run, the cluster (if any) refuses a layout it
cannot hold, and the workload's inputs (data, prompts, the tiny model) are made; nothing is written under
`--out` yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlbench.adapters.base import Adapter
from rlbench.adapters.registry import get_adapter
from rlbench.harness.cluster.session import ClusterSession, join_for_run
from rlbench.harness.run import profiling
from rlbench.harness.spec.environment import collect_environment
from rlbench.harness.spec.inputs import RunInputs, prepare_inputs
from rlbench.harness.spec.runspec import RunSpec


@dataclass(slots=True)
class Resolved:
    """What the later phases run with: the framework's adapter, the cluster joined (or None), the inputs made,
    and this host's environment."""

    adapter: Adapter
    cluster: ClusterSession | None
    inputs: RunInputs
    environment: dict[str, Any]


def resolve(spec: RunSpec, echo: Callable[[str], None]) -> Resolved:
    """Refuse what cannot run, join the cluster, make the inputs; the cluster is left again if a later step
    here refuses."""
    adapter = get_adapter(spec.framework)
    adapter.check(spec)
    adapter.check_machine()
    profiling.sample_hz()  # a bad RLBENCH_SAMPLE_HZ is refused before anything is recorded
    cluster = join_for_run(spec, adapter)
    try:
        inputs = prepare_inputs(spec.workload, spec.seed)
        environment = collect_environment((adapter.distribution,))
    except BaseException:
        if cluster is not None:
            cluster.close()  # refused before launch: leave the cluster as found
        raise
    if not adapter.version_is_tested():
        echo(
            f"warning: {adapter.name} {adapter.version()} is not a version rlbench was tested with "
            f"({adapter.tested_versions}); check the record's metrics before trusting them"
        )
    return Resolved(adapter, cluster, inputs, environment)
