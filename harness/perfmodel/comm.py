"""Bytes each GPU sends in a collective, and which link it crosses.

Ring algorithms (nccl-tests doc/PERFORMANCE.md, "bus bandwidth"): over n ranks with a
buffer of S bytes, all-reduce moves 2(n-1)/n * S per rank; all-gather and reduce-scatter
move (n-1)/n * S (S = the full, gathered size); all-to-all sends (n-1)/n of the local
buffer. Time = bytes / per-direction link bandwidth; latency (the alpha term) is ignored,
so small-message collectives (decode-time TP all-reduces) are optimistic.

    from rlbench.harness.perfmodel import get_hardware
    from rlbench.harness.perfmodel.comm import all_reduce_bytes, link_bandwidth, ring_bandwidth
    all_reduce_bytes(8, 1e9)                         # 1.75e9 bytes per GPU
    link_bandwidth(get_hardware("H100-SXM"), 16, 1)  # 50e9: a 16-rank all-to-all leaves through each GPU's NIC
    ring_bandwidth(get_hardware("H100-SXM"), 16, 1)  # 400e9: a 16-rank ring crosses 8 NICs a node
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.harness.perfmodel.hardware import Hardware


@dataclass(frozen=True, kw_only=True, slots=True)
class Collective:
    """One kind of communication of a stage: bytes each GPU sends, over which link."""

    kind: str  # e.g. "fsdp_all_gather", "tp_all_reduce", "dp_all_reduce", "weight_transfer"
    bytes_per_gpu: float
    bandwidth: float | None  # bytes/s per direction of the link it crosses; None: unknown

    def time_s(self) -> float | None:
        if self.bytes_per_gpu <= 0:
            return 0.0
        return None if not self.bandwidth else self.bytes_per_gpu / self.bandwidth


def all_reduce_bytes(ranks: int, size: float) -> float:
    return 2 * (ranks - 1) / ranks * size if ranks > 1 else 0.0


def all_gather_bytes(ranks: int, size: float) -> float:
    return (ranks - 1) / ranks * size if ranks > 1 else 0.0


reduce_scatter_bytes = all_gather_bytes
all_to_all_bytes = all_gather_bytes


def spans_nodes(hw: Hardware, ranks: int, stride: int) -> bool:
    """Whether a group of `ranks` spaced `stride` apart (ranks packed node by node) leaves a node."""
    return ranks > 1 and ranks * stride > hw.gpus_per_node


def link_bandwidth(hw: Hardware, ranks: int, stride: int = 1) -> float | None:
    """The link each GPU's own traffic crosses in a group: NVLink inside a node, its NIC across (all-to-all,
    point-to-point sends and rings of them, where every GPU's bytes to another node leave through its NIC)."""
    return hw.inter_node_bytes_per_s if spans_nodes(hw, ranks, stride) else hw.intra_node_bytes_per_s


def ring_bandwidth(hw: Hardware, ranks: int, stride: int = 1) -> float | None:
    """Per-GPU bandwidth of a ring collective (all-gather, reduce-scatter, all-reduce) over that group.

    Inside a node: NVLink. Across nodes NCCL runs one ring per channel and spreads the channels over the
    node's NICs (one per GPU on the reference systems); a ring crosses each node boundary once per direction,
    so of the bytes each GPU forwards only 1/g leave through its NIC, g being the group's ranks on one node.
    The ring then runs at min(NVLink, g x NIC): 400 GB/s for 8 H100 a node with one 400 Gb/s NIC each, as
    nccl-tests measures across nodes (all_reduce bus bandwidth 400-450 GB/s for H100 SXM with InfiniBand NDR,
    https://saturncloud.io/blog/crusoe-nccl-cluster-validation); g = 1 (a group strided one rank a node) is
    the NIC alone."""
    if not spans_nodes(hw, ranks, stride):
        return hw.intra_node_bytes_per_s
    if hw.inter_node_bytes_per_s is None or hw.intra_node_bytes_per_s is None:
        return hw.inter_node_bytes_per_s
    per_node = max(1, min(ranks, hw.gpus_per_node // stride))
    return min(hw.intra_node_bytes_per_s, per_node * hw.inter_node_bytes_per_s)


def comm_time_s(collectives: tuple[Collective, ...]) -> float | None:
    """Collectives of one stage run one after another; None when any has an unknown link."""
    total = 0.0
    for collective in collectives:
        time = collective.time_s()
        if time is None:
            return None
        total += time
    return total


def merge(collectives: list[Collective]) -> tuple[Collective, ...]:
    """Sum bytes of same-kind collectives over the same link; drop empty ones."""
    merged: dict[tuple[str, float | None], float] = {}
    for c in collectives:
        if c.bytes_per_gpu > 0:
            merged[(c.kind, c.bandwidth)] = merged.get((c.kind, c.bandwidth), 0.0) + c.bytes_per_gpu
    return tuple(Collective(kind=k, bytes_per_gpu=b, bandwidth=bw) for (k, bw), b in merged.items())
