"""The cost of one stage: roofline time and Brent work-depth bounds.

For a stage on p GPUs with total FLOPs F, total HBM bytes M and per-GPU communication C:

    compute = F / (p * peak * a)     memory = M / (p * hbm_bw * a)     comm = sum(C_i / link_i) / a
    roofline (W/p) = max(compute, memory, comm)

compute, memory and communication overlap perfectly (a lower bound), while collectives of
one stage run one after another. `a` is the achievable fraction of peak, one number for
all three (default 1.0: pure roofline, a true lower bound; measured systems reach about
0.3-0.6 of bf16 peak in training and 0.6-0.8 of HBM bandwidth in decode).

The depth term D is the critical path: the work the busiest GPU must do in sequence
(decode steps, layers x micro-batches, plus the pipeline bubble), timed by the same
roofline. It exceeds W/p when work is uneven: a decode tail of long responses, a
pipeline bubble, a batch that does not divide over the replicas. Brent's theorem then
brackets the time of a greedy schedule:

    max(W/p, D) <= T_p <= W/p + D

and the stage's predicted time is the lower bound max(W/p, D).

    from rlbench.perfmodel import get_hardware
    from rlbench.perfmodel.roofline import Work, build_stage
    stage = build_stage("x", hw=get_hardware("H100-SXM"), achievable=1.0, gpus=8, flops=8e15, bytes=0.0,
                        comm=(), depth=1, critical=Work(flops=1e15, bytes=0.0))
    stage.time_s      # 1e15 / 989e12 s
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlbench.perfmodel.comm import Collective, comm_time_s
from rlbench.perfmodel.hardware import Hardware


@dataclass(frozen=True, kw_only=True, slots=True)
class Work:
    """What one GPU does in sequence on the stage's critical path."""

    flops: float
    bytes: float
    comm: tuple[Collective, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class StageCost:
    name: str
    gpus: int
    flops: float  # hardware FLOPs, all GPUs, recomputation included
    model_flops: float  # FLOPs of the model math only (no recomputation): MFU's numerator
    bytes: float  # HBM bytes read + written, all GPUs
    comm: tuple[Collective, ...]  # per-GPU bytes by collective
    depth: int  # sequential units on the critical path (decode steps, layer passes, ...)
    compute_time_s: float
    memory_time_s: float
    comm_time_s: float | None
    depth_time_s: float | None
    time_s: float | None  # max(roofline, depth): Brent's lower bound
    brent_upper_s: float | None  # roofline + depth
    bound: str  # "compute", "memory", "comm" (largest roofline term) or "none" (no work)
    note: str = ""

    @property
    def comm_bytes(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for collective in self.comm:
            out[collective.kind] = out.get(collective.kind, 0.0) + collective.bytes_per_gpu
        return out

    @property
    def roofline_s(self) -> float | None:
        if self.comm_time_s is None:
            return None
        return max(self.compute_time_s, self.memory_time_s, self.comm_time_s)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gpus": self.gpus, "flops": self.flops, "model_flops": self.model_flops,
                "bytes": self.bytes, "comm_bytes": self.comm_bytes, "depth": self.depth,
                "compute_time_s": self.compute_time_s, "memory_time_s": self.memory_time_s,
                "comm_time_s": self.comm_time_s, "depth_time_s": self.depth_time_s, "time_s": self.time_s,
                "brent": {"lower_s": self.time_s, "upper_s": self.brent_upper_s},
                "bound": self.bound, "note": self.note}


def _times(hw: Hardware, achievable: float, gpus: int, flops: float, nbytes: float,
           comm: tuple[Collective, ...]) -> tuple[float, float, float | None]:
    compute = flops / (gpus * hw.bf16_flops * achievable)
    memory = nbytes / (gpus * hw.hbm_bytes_per_s * achievable)
    link = comm_time_s(comm)
    return compute, memory, (None if link is None else link / achievable)


def build_stage(name: str, *, hw: Hardware, achievable: float, gpus: int, flops: float, bytes: float,
                comm: tuple[Collective, ...], depth: int, critical: Work, model_flops: float | None = None,
                note: str = "") -> StageCost:
    """Time a stage from its totals (W/p) and its critical-path work (D)."""
    if gpus < 1 or (flops <= 0 and bytes <= 0 and not comm):
        return empty_stage(name, gpus=max(gpus, 0), note=note)
    compute, memory, link = _times(hw, achievable, gpus, flops, bytes, comm)
    d_compute, d_memory, d_link = _times(hw, achievable, 1, critical.flops, critical.bytes, critical.comm)
    if link is None or d_link is None:
        roof = depth_time = time = upper = None
    else:
        roof = max(compute, memory, link)
        depth_time = max(d_compute, d_memory, d_link)
        time, upper = max(roof, depth_time), roof + depth_time
    terms = {"compute": compute, "memory": memory, "comm": link if link is not None else 0.0}
    return StageCost(name=name, gpus=gpus, flops=flops, model_flops=flops if model_flops is None else model_flops,
                     bytes=bytes, comm=comm, depth=depth, compute_time_s=compute, memory_time_s=memory,
                     comm_time_s=link, depth_time_s=depth_time, time_s=time, brent_upper_s=upper,
                     bound=max(terms, key=terms.__getitem__), note=note)


def empty_stage(name: str, *, gpus: int = 0, note: str = "") -> StageCost:
    """A stage this step does not run (or whose work is off the GPUs): zero cost."""
    return StageCost(name=name, gpus=gpus, flops=0.0, model_flops=0.0, bytes=0.0, comm=(), depth=0,
                     compute_time_s=0.0, memory_time_s=0.0, comm_time_s=0.0, depth_time_s=0.0, time_s=0.0,
                     brent_upper_s=0.0, bound="none", note=note)
