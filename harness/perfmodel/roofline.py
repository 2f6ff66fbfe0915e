"""The cost of one stage: roofline work term, latency depth term, and Brent work-depth bounds.

For a stage on p devices with total FLOPs F, total memory bytes M and per-device communication C:

    compute = F / (p * peak * a)     memory = M / (p * mem_bw * a)     comm = sum(C_i / link_i) / a
    W/p = max(compute, memory, comm, busiest)

compute, memory and communication overlap perfectly (a lower bound), while collectives of one
stage run one after another. The exception is `serial_bytes`: bytes of memory-bound kernels that
run between the matmuls rather than under them (decode attention reading the KV cache, and a
cache copied to grow it). A device runs its kernels one after another, so those bytes' time adds
to the rest: busiest = max(compute, other memory, comm) + serial memory. So does the latency of
collectives that sit between kernels (a decode step's TP all-reduces, comm.comm_latency_s).
`busiest` is the same roofline applied to the work of the busiest
device alone (a decode tail, a pipeline bubble, a batch that does not divide over replicas);
the schedule is static, so that device sets the pace. `a` is the achievable fraction of peak,
one number for all three (default 1.0: a pure roofline).

Depth (Blelloch's work-depth model; Brent 1974, "The parallel evaluation of general arithmetic
expressions", J. ACM 21(2)): D counts the sequential units on the busiest device's critical
path, each unit one transformer layer's chain of kernels (one layer's forward for one
micro-batch or one decode step; the model's ends and the sampler or loss are 2 more units
per pass, `pass_units`; a backward counts as 2 units, as its FLOPs do). However small a unit's arithmetic, it costs at
least the hardware's measured `op_latency_s` t (dispatch, launch, thread synchronisation), so
the span is D * t, and a greedy schedule satisfies

    max(W/p, D * t) <= T <= W/p + D * t

The stage's predicted time_s is the bound that matches how the device dispatches:
* overlaps_latency=True (GPU: the host enqueues kernels on a stream ahead of the device) ->
  the lower bound max(W/p, D * t): a unit costs max(work, latency).
* overlaps_latency=False (CPU, eager PyTorch: the thread that dispatches an op then runs it)
  -> the upper bound W/p + D * t: a unit costs work + latency.
A row with no measured latency (every datasheet row: no datasheet states one) has no span:
depth_time_s and brent_upper_s are None and time_s is the roofline W/p, a lower bound only.

    from rlbench.harness.perfmodel import get_hardware
    from rlbench.harness.perfmodel.roofline import Work, build_stage
    stage = build_stage("x", hw=get_hardware("H100-SXM"), achievable=1.0, gpus=8, flops=8e15, bytes=0.0,
                        comm=(), depth=1, critical=Work(flops=1e15, bytes=0.0))
    stage.time_s      # 1e15 / 989e12 s
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlbench.harness.perfmodel.comm import Collective, comm_latency_s, comm_time_s
from rlbench.harness.perfmodel.hardware import Hardware


@dataclass(frozen=True, kw_only=True, slots=True)
class Work:
    """What one device does in sequence on the stage's critical path."""

    flops: float
    bytes: float
    comm: tuple[Collective, ...] = ()
    serial_bytes: float = 0.0  # of `bytes`: moved by memory-bound kernels between the matmuls
    # Seconds of communication that overlaps only part of the compute (the CP ring hides under
    # attention alone, trainer_comm.ring_exposure_s): added to the busiest device's compute term.
    exposed_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class StageCost:
    name: str
    gpus: int
    flops: float  # hardware FLOPs, all GPUs, recomputation included
    model_flops: float  # FLOPs of the model math only (no recomputation): MFU's numerator
    bytes: float  # HBM bytes read + written, all GPUs
    comm: tuple[Collective, ...]  # per-GPU bytes by collective
    depth: float  # D: sequential layer-sized units on the critical path
    compute_time_s: float
    memory_time_s: float
    comm_time_s: float | None
    busiest_time_s: float | None  # roofline of the busiest device's own work
    depth_time_s: float | None  # span D * op_latency_s; None when the hardware's latency is unknown
    time_s: float | None  # predicted: Brent's lower or upper bound, by hw.overlaps_latency
    brent_lower_s: float | None  # max(W/p, D * t)
    brent_upper_s: float | None  # W/p + D * t; None without a measured latency
    bound: str  # "compute", "memory", "comm", "latency", "framework" (largest term) or "none" (no work)
    note: str = ""
    floor_s: float = 0.0  # the framework's measured per-step floor included in time_s (perfmodel/floor.py)

    @property
    def comm_bytes(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for collective in self.comm:
            out[collective.kind] = out.get(collective.kind, 0.0) + collective.bytes_per_gpu
        return out

    @property
    def roofline_s(self) -> float | None:
        """W/p: the largest of the roofline terms (the busiest device's included)."""
        if self.comm_time_s is None or self.busiest_time_s is None:
            return None
        return max(self.compute_time_s, self.memory_time_s, self.comm_time_s, self.busiest_time_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gpus": self.gpus,
            "flops": self.flops,
            "model_flops": self.model_flops,
            "bytes": self.bytes,
            "comm_bytes": self.comm_bytes,
            "depth": self.depth,
            "compute_time_s": self.compute_time_s,
            "memory_time_s": self.memory_time_s,
            "comm_time_s": self.comm_time_s,
            "busiest_time_s": self.busiest_time_s,
            "depth_time_s": self.depth_time_s,
            "time_s": self.time_s,
            "brent": {"lower_s": self.brent_lower_s, "upper_s": self.brent_upper_s},
            "bound": self.bound,
            "note": self.note,
            "floor_s": self.floor_s,
        }


def pass_units(layers: int) -> int:
    """Sequential units of one forward pass: its layers, plus one for the model's ends (embedding,
    rotary tables, mask, final norm, head) and one for what consumes the logits (the sampler in
    generation, the loss or log-prob gather in training); each is a chain of about as many small
    kernels as a layer (on the probe's CPU, Hugging Face generate at hidden 64 costs (L + 2) x
    0.5 ms per step, the probed layer 0.44 ms)."""
    return layers + 2


def _times(
    hw: Hardware,
    achievable: float,
    gpus: int,
    flops: float,
    nbytes: float,
    comm: tuple[Collective, ...],
    rate: float,
    compute_fraction: float = 1.0,
) -> tuple[float, float, float | None]:
    compute = flops / (gpus * rate * achievable * compute_fraction)
    memory = nbytes / (gpus * hw.hbm_bytes_per_s * achievable)
    link = comm_time_s(comm)
    return compute, memory, (None if link is None else link / achievable)


def brent(work_s: float, depth: float, hw: Hardware) -> tuple[float | None, float, float | None, float]:
    """(span, lower, upper, predicted) for a stage whose roofline is work_s and depth D."""
    if hw.op_latency_s is None:
        return None, work_s, None, work_s
    span = depth * hw.op_latency_s
    lower, upper = max(work_s, span), work_s + span
    return span, lower, upper, (lower if hw.overlaps_latency else upper)


def largest_term(compute: float, memory: float, comm: float | None, span: float | None, framework: float = 0.0) -> str:
    """A stage's `bound`: the name of its largest time term."""
    terms = {"compute": compute, "memory": memory, "comm": comm or 0.0, "latency": span or 0.0, "framework": framework}
    return max(terms, key=terms.__getitem__)


def build_stage(
    name: str,
    *,
    hw: Hardware,
    achievable: float,
    gpus: int,
    flops: float,
    bytes: float,
    comm: tuple[Collective, ...],
    depth: float,
    critical: Work,
    model_flops: float | None = None,
    matmul_rows: float | None = None,
    matmul_dim: float | None = None,
    training: bool = False,
    weight_bytes: float | None = None,
    note: str = "",
    compute_fraction: float = 1.0,
) -> StageCost:
    """Time a stage from its totals (W/p), its busiest device's work and its depth D.

    matmul_rows x matmul_dim is the shape of the stage's typical matmul (tokens in flight x hidden):
    where the hardware row measured FLOP/s by shape (the CPU probe), compute runs at that rate
    (the forward + backward rate for a `training` stage; the streamed rate when the `weight_bytes`
    one device reads per pass exceed its cache). `critical.serial_bytes` and the latency of
    `critical.comm` add their time after the overlapped terms (see the module docstring).
    `compute_fraction` scales the compute rate alone (the estimate's trainer MFU, overheads.TRAINER_MFU);
    1.0 for the bound."""
    if gpus < 1 or (flops <= 0 and bytes <= 0 and not comm):
        return empty_stage(name, gpus=max(gpus, 0), note=note)
    rate = hw.matmul_flops_per_s(matmul_rows, matmul_dim, training, weight_bytes)
    compute, memory, link = _times(hw, achievable, gpus, flops, bytes, comm, rate, compute_fraction)
    d_compute, d_memory, d_link = _times(
        hw, achievable, 1, critical.flops, critical.bytes, critical.comm, rate, compute_fraction
    )
    busiest = span = lower = upper = time = None
    if link is not None and d_link is not None:
        d_serial = critical.serial_bytes / (hw.hbm_bytes_per_s * achievable)
        # The busiest device's serial kernels follow its overlapped work, so that device's time is
        # never below the stage's averages: W/p is `busiest` whenever serial bytes exist.
        busiest = (
            max(d_compute + critical.exposed_s, d_memory - d_serial, d_link) + d_serial + comm_latency_s(critical.comm)
        )
        span, lower, upper, time = brent(max(compute, memory, link, busiest), depth, hw)
    return StageCost(
        name=name,
        gpus=gpus,
        flops=flops,
        model_flops=flops if model_flops is None else model_flops,
        bytes=bytes,
        comm=comm,
        depth=depth,
        compute_time_s=compute,
        memory_time_s=memory,
        comm_time_s=link,
        busiest_time_s=busiest,
        depth_time_s=span,
        time_s=time,
        brent_lower_s=lower,
        brent_upper_s=upper,
        bound=largest_term(compute, memory, link, span),
        note=note,
    )


def empty_stage(name: str, *, gpus: int = 0, note: str = "") -> StageCost:
    """A stage this step does not run (or whose work is off the GPUs): zero cost."""
    return StageCost(
        name=name,
        gpus=gpus,
        flops=0.0,
        model_flops=0.0,
        bytes=0.0,
        comm=(),
        depth=0,
        compute_time_s=0.0,
        memory_time_s=0.0,
        comm_time_s=0.0,
        busiest_time_s=0.0,
        depth_time_s=0.0,
        time_s=0.0,
        brent_lower_s=0.0,
        brent_upper_s=0.0,
        bound="none",
        note=note,
    )
