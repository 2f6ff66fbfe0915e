"""Bytes each GPU sends in a collective, and which link it crosses.

Ring algorithms (nccl-tests doc/PERFORMANCE.md, "bus bandwidth"): over n ranks with a
buffer of S bytes, all-reduce moves 2(n-1)/n * S per rank; all-gather and reduce-scatter
move (n-1)/n * S (S = the full, gathered size); all-to-all sends (n-1)/n of the local
buffer. Time = bytes / per-direction link bandwidth. Where a stage gives it, the collectives'
latency (the alpha term, comm_latency_s) is kept apart: a decode step's TP all-reduces carry a
few KB each and sit between the layers' kernels, so their latency adds to the step rather than
overlapping it (roofline.build_stage). Training's collectives carry megabytes and keep the
bandwidth term alone.

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
    latency_s: float = 0.0  # the latency of every call of this kind, summed (0: not priced)

    def time_s(self) -> float | None:
        if self.bytes_per_gpu <= 0:
            return 0.0
        return None if not self.bandwidth else self.bytes_per_gpu / self.bandwidth


# NCCL's own cost model of a collective's latency (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, at
# commit b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2), microseconds, for the LL protocol small messages use:
# a base latency per algorithm and a per-hop latency per link type.
NCCL_BASE_LAT_US = {"ring": 6.6, "tree": 6.8}
NCCL_HOP_LAT_US = {"nvlink": {"ring": 0.6, "tree": 0.6}, "net": {"ring": 2.7, "tree": 5.0}}
NCCL_NET_OVERHEAD_US = 1.0  # its per-step network post overhead on an x86 host (getNetOverhead; 2.0 on AMD)


def all_reduce_latency_s(hw: Hardware, ranks: int) -> float:
    """Latency of one small all-reduce over `ranks` GPUs packed node by node: the lower of NCCL's ring and tree
    LL estimates (NCCL picks the faster). Inside one NVLink domain, 8 ranks: 15 us (vLLM's own custom
    all-reduce measured 9-12 us at 4-32 KB for 2-8 H100s, sgl-project/sglang PR #2904); 16 ranks over two
    nodes: 25 us, the tree's two network hops."""
    if ranks <= 1:
        return 0.0
    nodes = -(-ranks // hw.gpus_per_node)
    per_node = ranks // nodes
    steps = 2 * (ranks - 1)
    if nodes == 1:
        ring = NCCL_BASE_LAT_US["ring"] + steps * NCCL_HOP_LAT_US["nvlink"]["ring"]
        tree = NCCL_BASE_LAT_US["tree"] + 2 * (ranks - 1) * NCCL_HOP_LAT_US["nvlink"]["tree"]
    else:
        inter_steps = 2 * nodes
        intra = max(NCCL_HOP_LAT_US["nvlink"]["ring"], NCCL_NET_OVERHEAD_US)
        ring = NCCL_BASE_LAT_US["ring"] + (steps - inter_steps) * intra + inter_steps * NCCL_HOP_LAT_US["net"]["ring"]
        tree = NCCL_BASE_LAT_US["tree"] + 2 * (
            (per_node - 1) * NCCL_HOP_LAT_US["nvlink"]["tree"]
            + max(1, (nodes - 1).bit_length()) * NCCL_HOP_LAT_US["net"]["tree"]
        )
    return min(ring, tree) * 1e-6


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


def comm_latency_s(collectives: tuple[Collective, ...]) -> float:
    """The summed latency of a stage's collectives: paid in sequence with its kernels."""
    return sum(c.latency_s for c in collectives)


def merge(collectives: list[Collective]) -> tuple[Collective, ...]:
    """Sum bytes of same-kind collectives over the same link; drop empty ones."""
    merged: dict[tuple[str, float | None], tuple[float, float]] = {}
    for c in collectives:
        if c.bytes_per_gpu > 0:
            size, latency = merged.get((c.kind, c.bandwidth), (0.0, 0.0))
            merged[(c.kind, c.bandwidth)] = (size + c.bytes_per_gpu, latency + c.latency_s)
    return tuple(
        Collective(kind=k, bytes_per_gpu=b, bandwidth=bw, latency_s=lat) for (k, bw), (b, lat) in merged.items()
    )
