"""The Ray cluster a run joins: its live nodes and their resources, and whether a layout fits them.

    python -c "import ray; from rlbench.harness.cluster.ray_cluster import connect, cluster_nodes; \
        connect('127.0.0.1:6379'); print(cluster_nodes())"
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlbench.harness.errors import RLBenchError


@dataclass(frozen=True, slots=True)
class ClusterNode:
    label: str  # node0 (the head), node1, ...: the `node` of its telemetry rows
    node_id: str  # Ray's node id
    ip: str  # the address Ray knows it by
    gpus: int  # Ray's GPU resource on it (logical on a CPU lane's cluster)
    cpus: float
    head: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def connect(address: str) -> Any:
    """Join the cluster as a driver (the run's agents belong to this process); one line if it cannot."""
    try:
        import ray
    except ImportError:
        raise RLBenchError(
            f"--ray-address {address}: Ray is not installed here; pip install 'ray[default]' at the cluster's version"
        ) from None
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RLBenchError(
            f"--ray-address {address}: cannot join that Ray cluster ({str(exc).splitlines()[0][:200]}); "
            "check that it runs (`ray status --address ...`) and runs this Ray version"
        ) from None
    return ray


def cluster_nodes() -> list[ClusterNode]:
    """The live nodes of the joined cluster, the head first, then by address."""
    import ray

    alive = [n for n in ray.nodes() if n.get("Alive")]  # the head holds Ray's internal head resource
    heads = {n["NodeID"] for n in alive if "node:__internal_head__" in (n.get("Resources") or {})}
    ordered = sorted(alive, key=lambda n: (n["NodeID"] not in heads, n.get("NodeManagerAddress", ""), n["NodeID"]))
    return [
        ClusterNode(
            label=f"node{i}",
            node_id=n["NodeID"],
            ip=n.get("NodeManagerAddress", ""),
            gpus=int((n.get("Resources") or {}).get("GPU", 0)),
            cpus=float((n.get("Resources") or {}).get("CPU", 0)),
            head=n["NodeID"] in heads,
        )
        for i, n in enumerate(ordered)
    ]


def check_fits(nodes: list[ClusterNode], wanted_nodes: int, gpus_each: int, layout: str) -> None:
    """Refuse, before launch, a layout of `wanted_nodes` nodes with `gpus_each` GPUs on each that the cluster's
    nodes cannot hold (one line: what is asked, what the cluster has)."""
    roomy = [n for n in nodes if n.gpus >= gpus_each]
    if len(roomy) >= wanted_nodes:
        return
    have = ", ".join(f"{n.label} {n.gpus}" for n in nodes) or "no live node"
    raise RLBenchError(
        f"--parallel {layout}: needs {wanted_nodes} node(s) with {gpus_each} GPU(s) each, the Ray cluster has "
        f"{len(roomy)} such (GPUs per node: {have}); add nodes or use a smaller layout"
    )
