"""Accelerator peaks from vendor datasheets, one cited row per device, and a CPU row built at run time.

Every peak is the DENSE figure: NVIDIA's headline tensor numbers for Ampere/Hopper/Blackwell
and the L40S are marked "with sparsity" (2:4 structured), twice the dense rate, so the table
halves them. A field the datasheet does not state is None, and everything computed from it
comes out None ("n/a"); nothing is guessed. An unknown device name is an error, never a
made-up peak.

    from rlbench.harness.perfmodel import get_hardware, cpu_hardware
    h100 = get_hardware("H100-SXM")          # 989e12 dense bf16 FLOP/s, 3.35e12 B/s
    cpu = cpu_hardware(peak_flops=1.2e12, mem_bw=4.0e10, op_latency_s=3e-4)   # measured by a probe

Link bandwidths are per GPU and per direction: NVIDIA quotes NVLink as the bidirectional
total (A100 600 GB/s, H100/H200 900 GB/s, B200 1.8 TB/s), so the table holds half of it.
Inter-node bandwidth is the per-GPU NIC of the vendor's reference DGX system (one
ConnectX per GPU); other clusters differ, so pass your own row when they do.

`op_latency_s` is the time of one sequential unit of the work-depth model (roofline.py): one
transformer layer's chain of kernels at a size where its arithmetic is negligible, i.e. the
dispatch, launch and synchronisation floor every layer pays however small it is. No datasheet
states it, so the GPU rows leave it None (their depth term then uses compute only); the CPU
row takes it from `rlbench.harness.predict.cpu_probe`. `overlaps_latency` says whether that floor hides behind
the arithmetic: a GPU's host enqueues kernels asynchronously on a stream, so it does; eager
PyTorch on a CPU runs each op on the thread that dispatched it, so dispatch and arithmetic add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel.names import lookup

GB = 1e9
TB = 1e12
GiB = 2**30


@dataclass(frozen=True, kw_only=True, slots=True)
class Hardware:
    name: str
    bf16_flops: float  # dense bf16 tensor-core FLOP/s per device
    fp32_flops: float | None  # non-tensor fp32 FLOP/s per device
    hbm_bytes_per_s: float  # device memory bandwidth
    hbm_bytes: float | None  # device memory capacity (decimal bytes, as the datasheet states it)
    intra_node_bytes_per_s: float | None  # per GPU, one direction (NVLink, or PCIe where none)
    inter_node_bytes_per_s: float | None  # per GPU, one direction (the reference system's NIC)
    # GPU <-> host memory, one direction: what CPU offload (parameters or optimizer states in host memory)
    # moves over; None: unknown, or no separate host (CPU rows)
    host_link_bytes_per_s: float | None = None
    tdp_w: float | None  # maximum board power
    usd_per_gpu_hour: float | None = None  # default price; pass gpu_hour_usd to predict() instead
    gpus_per_node: int = 8
    op_latency_s: float | None = None  # seconds per sequential unit (one layer's kernel chain); None: unknown
    overlaps_latency: bool = True  # True: asynchronous dispatch (GPU streams); False: dispatch adds (CPU eager)
    # Measured matmul FLOP/s by shape, ((rows, dim, flop_per_s), ...): a small matmul runs far below
    # peak (cache blocking, threading overhead). Empty: every matmul at bf16_flops (datasheet rows).
    matmul_rates: tuple[tuple[int, int, float], ...] = ()
    # The same for training: FLOP/s of a decoder layer's forward + backward (its GEMMs and the norms,
    # rotary, attention and activation between them; cpu_probe.measure_train_matmul_rates) by (rows, dim).
    train_matmul_rates: tuple[tuple[int, int, float], ...] = ()
    # The forward rate again, with the weights cycled through a pool far larger than the cache, so
    # every matmul reads its weights from beyond it: a decode step streams the whole model once,
    # and a skinny matmul on cold weights runs several times below the cache-hot rate.
    streamed_matmul_rates: tuple[tuple[int, int, float], ...] = ()
    cache_bytes: float | None = None  # the cache the threads share (CPU: per-core L2 x threads); None: unknown
    source: str = ""

    def matmul_flops_per_s(
        self, rows: float | None, dim: float | None, training: bool = False, weight_bytes: float | None = None
    ) -> float:
        """FLOP/s of a [rows x dim] matmul (forward, or forward + backward when `training`):
        bilinear in log-log over the measured grid, clamped to its edges; the peak where nothing
        was measured or the shape is unknown. A forward pass whose weights (`weight_bytes`, read
        once per pass) do not fit in `cache_bytes` runs at the streamed rate where one was measured."""
        rates = self.train_matmul_rates if training and self.train_matmul_rates else self.matmul_rates
        if (
            not training
            and self.streamed_matmul_rates
            and weight_bytes
            and self.cache_bytes
            and weight_bytes > self.cache_bytes
        ):
            rates = self.streamed_matmul_rates
        if not rates or not rows or not dim:
            return self.bf16_flops
        table = {(m, k): r for m, k, r in rates}
        ms, ks = sorted({m for m, _ in table}), sorted({k for _, k in table})

        def bracket(axis: list[int], value: float) -> tuple[int, int, float]:
            value = min(max(value, axis[0]), axis[-1])
            hi = next(i for i, a in enumerate(axis) if a >= value)
            lo = max(hi - 1, 0)
            if axis[hi] == axis[lo]:
                return lo, hi, 0.0
            return lo, hi, (math.log(value) - math.log(axis[lo])) / (math.log(axis[hi]) - math.log(axis[lo]))

        m0, m1, fm = bracket(ms, rows)
        k0, k1, fk = bracket(ks, dim)
        log_rate = sum(
            weight * math.log(table[(ms[i], ks[j])])
            for i, j, weight in (
                (m0, k0, (1 - fm) * (1 - fk)),
                (m1, k0, fm * (1 - fk)),
                (m0, k1, (1 - fm) * fk),
                (m1, k1, fm * fk),
            )
        )
        return math.exp(log_rate)

    def __post_init__(self) -> None:
        for field in ("bf16_flops", "hbm_bytes_per_s"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Hardware.{field}={value!r}: must be a positive number")
        if self.op_latency_s is not None and (
            not isinstance(self.op_latency_s, (int, float)) or self.op_latency_s <= 0
        ):
            raise ValueError(f"Hardware.op_latency_s={self.op_latency_s!r}: must be a positive number or None")
        for field in ("matmul_rates", "train_matmul_rates", "streamed_matmul_rates"):
            rates = getattr(self, field)
            grid = {(m, k) for m, k, _ in rates}
            if rates and (
                len(grid) != len({m for m, _ in grid}) * len({k for _, k in grid}) or any(r <= 0 for _, _, r in rates)
            ):
                raise ValueError(f"Hardware.{field}: must be a full (rows x dim) grid of positive FLOP/s")
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"Hardware.gpus_per_node={self.gpus_per_node!r}: must be a positive integer")


_A100_PDF = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_DGX_A100 = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/nvidia-dgx-a100-datasheet.pdf "
    "(8x ConnectX-6 200 Gb/s)"
)
_DGX_H100 = "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html (8x ConnectX-7 400 Gb/s)"
# AWS p5.48xlarge on-demand $98.32/h for 8 H100 (list price as cited in 2026 market surveys,
# e.g. https://computespec.pages.dev/learn/pricing/cost-per-gpu-hour); prices vary 2-5x by provider.
_P5_PRICE = 98.32 / 8

# Host links, one direction. PCIe x16 (PCI-SIG: 16 GT/s a lane for Gen4, 32 GT/s for Gen5, 128b/130b
# encoding): Gen4 31.5 GB/s, Gen5 63 GB/s; NVIDIA's datasheets round them to "PCIe Gen4: 64GB/s" (A100)
# and "PCIe Gen5: 128GB/s" (H100, H200) both directions together. Grace-Blackwell (GB200): NVLink-C2C,
# 900 GB/s both directions (https://www.nvidia.com/en-us/data-center/gb200-nvl72/).
_PCIE_GEN4_X16 = 31.5 * GB
_PCIE_GEN5_X16 = 63 * GB
_NVLINK_C2C = 450 * GB

HARDWARE: dict[str, Hardware] = {
    hw.name: hw
    for hw in (
        Hardware(
            name="A100-40GB",
            bf16_flops=312 * TB,
            fp32_flops=19.5 * TB,
            hbm_bytes_per_s=1555 * GB,
            hbm_bytes=40 * GB,
            intra_node_bytes_per_s=300 * GB,
            inter_node_bytes_per_s=25 * GB,
            host_link_bytes_per_s=_PCIE_GEN4_X16,
            tdp_w=400,
            source=f"A100 SXM datasheet {_A100_PDF} (BF16 312 dense / 624 sparse); {_DGX_A100}",
        ),
        Hardware(
            name="A100-80GB",
            bf16_flops=312 * TB,
            fp32_flops=19.5 * TB,
            hbm_bytes_per_s=2039 * GB,
            hbm_bytes=80 * GB,
            intra_node_bytes_per_s=300 * GB,
            inter_node_bytes_per_s=25 * GB,
            host_link_bytes_per_s=_PCIE_GEN4_X16,
            tdp_w=400,
            source=f"A100 SXM datasheet {_A100_PDF} (BF16 312 dense / 624 sparse); {_DGX_A100}",
        ),
        Hardware(
            name="H100-SXM",
            bf16_flops=989 * TB,
            fp32_flops=67 * TB,
            hbm_bytes_per_s=3.35 * TB,
            hbm_bytes=80 * GB,
            intra_node_bytes_per_s=450 * GB,
            inter_node_bytes_per_s=50 * GB,
            host_link_bytes_per_s=_PCIE_GEN5_X16,
            tdp_w=700,
            usd_per_gpu_hour=_P5_PRICE,
            source="https://www.nvidia.com/en-us/data-center/h100/ (BF16 1,979 TF with sparsity -> 989 dense; "
            f"NVLink 900 GB/s bidirectional); {_DGX_H100}; price: AWS p5.48xlarge $98.32/h / 8",
        ),
        Hardware(
            name="H200",
            bf16_flops=989 * TB,
            fp32_flops=67 * TB,
            hbm_bytes_per_s=4.8 * TB,
            hbm_bytes=141 * GB,
            intra_node_bytes_per_s=450 * GB,
            inter_node_bytes_per_s=50 * GB,
            host_link_bytes_per_s=_PCIE_GEN5_X16,
            tdp_w=700,
            source="https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: BF16 1,979 TF with sparsity -> "
            f"989 dense; 141 GB HBM3e at 4.8 TB/s; NVLink 900 GB/s); DGX H200 NICs as {_DGX_H100}",
        ),
        Hardware(
            name="H800",
            bf16_flops=989 * TB,
            fp32_flops=None,  # not stated in the cited file
            hbm_bytes_per_s=3.35 * TB,
            hbm_bytes=80 * GiB,
            intra_node_bytes_per_s=200 * GB,
            inter_node_bytes_per_s=50 * GB,
            host_link_bytes_per_s=_PCIE_GEN5_X16,
            tdp_w=700,
            source="NVIDIA's own system definition for its AIConfigurator, https://github.com/ai-dynamo/aiconfigurator/"
            'blob/77f0282e967cf0521dbb3e9a67845c005f131b49/src/aiconfigurator/systems/h800_sxm.yaml ("H800 SXM is '
            'the China-market variant of H100 SXM": bfloat16_tc_flops 989 TFLOPS, mem_bw 3,350 GB/s, 80 GiB, '
            'power 700 W; NVLink "400 GB/s bidirectional ... 200 GB/s per direction"; inter_node_bw 50 GB/s per '
            "GPU, one CX7 NDR 400 Gb/s each; pcie 5.0); NVIDIA's H800 datasheet PDF is not readable here",
        ),
        Hardware(
            name="H20",
            bf16_flops=148 * TB,
            fp32_flops=None,  # not stated in the cited file
            hbm_bytes_per_s=4.0 * TB,
            hbm_bytes=96 * GiB,
            intra_node_bytes_per_s=450 * GB,
            inter_node_bytes_per_s=25 * GB,
            host_link_bytes_per_s=_PCIE_GEN5_X16,
            tdp_w=None,  # 350 W in the cited file, 400 W in other listings: unknown
            source="NVIDIA's own system definition for its AIConfigurator, https://github.com/ai-dynamo/aiconfigurator/"
            "blob/e9fbc0a58077e943842951a129545d15465fb8e8/src/aiconfigurator/systems/h20_sxm.yaml (float16_tc_flops "
            "148 TFLOPS dense, int8/fp8 296; mem_bw 4,000 GB/s; 96 GiB; intra_node_bw 450 GB/s per direction; "
            "inter_node_bw 25 GB/s per GPU; pcie 5.0; power 350 W, against 400 W at "
            "https://huggingface.co/hardware/h20, so the TDP is left unknown); no NVIDIA H20 datasheet read here",
        ),
        Hardware(
            name="B200",
            bf16_flops=2250 * TB,
            fp32_flops=80 * TB,
            hbm_bytes_per_s=8 * TB,
            hbm_bytes=180 * GB,
            intra_node_bytes_per_s=900 * GB,
            inter_node_bytes_per_s=50 * GB,
            # host link: not stated in the sources above (Gen5 or Gen6 by system) -> unknown
            tdp_w=1000,
            source="https://www.nvidia.com/en-us/data-center/dgx-b200/ (DGX B200: 1,440 GB HBM3e for 8 GPUs, "
            "64 TB/s, NVLink 1.8 TB/s bidirectional, 8x ConnectX-7 400 Gb/s); HGX B200 1,000 W figures "
            "BF16 2,250 dense / 4,500 sparse, FP32 80 as tabulated from NVIDIA's Blackwell datasheet at "
            "https://glennklockwood.com/garden/processors/B200 (some HGX listings give 7.7 TB/s)",
        ),
        Hardware(
            name="GB200",
            bf16_flops=2500 * TB,
            fp32_flops=90 * TB,
            hbm_bytes_per_s=8 * TB,
            hbm_bytes=186 * GB,
            intra_node_bytes_per_s=900 * GB,
            inter_node_bytes_per_s=50 * GB,
            host_link_bytes_per_s=_NVLINK_C2C,
            tdp_w=1200,
            # NVL72: one NVLink domain of 72 GPUs, so every collective of up to 72 ranks stays on NVLink
            gpus_per_node=72,
            source="https://glennklockwood.com/garden/processors/B200 (GB200 variant at 1,200 W: BF16 2,500 dense "
            "/ 5,000 sparse, FP32 90, 8 TB/s, NVLink 5 2x 900 GB/s); https://www.nvidia.com/en-us/data-center/"
            "gb200-nvl72/ (13.4 TB HBM3e for 72 GPUs -> 186 GB each, 130 TB/s NVLink domain of 72 GPUs); NIC "
            "as DGX B200 (ConnectX-7 400 Gb/s per GPU)",
        ),
        Hardware(
            name="RTX-4090",
            bf16_flops=165.2 * TB,
            fp32_flops=82.6 * TB,
            hbm_bytes_per_s=1008 * GB,
            hbm_bytes=24 * GB,
            intra_node_bytes_per_s=32 * GB,
            inter_node_bytes_per_s=None,
            host_link_bytes_per_s=_PCIE_GEN4_X16,
            tdp_w=450,
            gpus_per_node=1,
            source="NVIDIA Ada GPU architecture whitepaper, appendix A, GeForce RTX 4090 (https://images.nvidia.com/"
            "aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf): BF16 tensor with FP32 accumulate "
            "165.2 dense / 330.4 sparse, FP32 82.6, 24 GB GDDR6X at 1,008 GB/s, 450 W; no NVLink: PCIe Gen4 x16 "
            "32 GB/s per direction; inter-node: system-dependent -> n/a",
        ),
        Hardware(
            name="L40S",
            bf16_flops=362 * TB,
            fp32_flops=91.6 * TB,
            hbm_bytes_per_s=864 * GB,
            hbm_bytes=48 * GB,
            intra_node_bytes_per_s=32 * GB,
            inter_node_bytes_per_s=None,
            host_link_bytes_per_s=_PCIE_GEN4_X16,
            tdp_w=350,
            source="https://www.nvidia.com/en-us/data-center/l40s/ (BF16 362.05 dense / 733 sparse; 48 GB GDDR6 "
            "864 GB/s; no NVLink: PCIe Gen4 x16 64 GB/s bidirectional); inter-node: system-dependent -> n/a",
        ),
        Hardware(
            name="A40",
            bf16_flops=149.7 * TB,
            fp32_flops=None,  # not read in the cited table
            hbm_bytes_per_s=696 * GB,
            hbm_bytes=48 * GB,
            # NVLink is a 2-way bridge (one peer, 112.5 GB/s bidirectional); across a node's GPUs it is PCIe Gen4
            intra_node_bytes_per_s=32 * GB,
            inter_node_bytes_per_s=None,
            host_link_bytes_per_s=_PCIE_GEN4_X16,
            tdp_w=300,
            source="https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf "
            '("BF16 Tensor 149.7 | 299.4*", * with sparsity; "48 GB GDDR6 with ECC", "696 GB/s"; '
            '"NVIDIA NVLink 112.5 GB/s (bidirectional); PCIe Gen4: 64 GB/s"; "Max Power Consumption 300 W"; '
            "read from copies of its spec table, 2026-12-06); inter-node: system-dependent -> n/a",
        ),
        Hardware(
            name="MI300X",
            bf16_flops=1307.4 * TB,
            fp32_flops=None,  # not read in the cited table
            hbm_bytes_per_s=5.3 * TB,
            hbm_bytes=192 * GB,
            # 7 Infinity Fabric x16 links at 64 GB/s each way: 448 GB/s one direction (896 GB/s aggregate)
            intra_node_bytes_per_s=448 * GB,
            inter_node_bytes_per_s=None,
            host_link_bytes_per_s=_PCIE_GEN5_X16,
            tdp_w=750,
            source="https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/"
            'amd-cdna-3-white-paper.pdf ("1307.4 TFLOPS peak theoretical Bfloat16" dense, 2,614.9 with '
            'sparsity; "192 GB HBM3", "up to 5.3 TB/sec"; "7 x16 AMD Infinity Fabric links", "P2P ring '
            'peak aggregate I/O bandwidth 896 GB/s", 16-lane links at 32 Gbps: 64 GB/s each way; PCIe Gen 5 x16 to '
            'host; "MAX POWER 750W"); inter-node: system-dependent -> n/a',
        ),
    )
}

_ALIASES = {
    "A100": "A100-80GB",
    "A100-SXM": "A100-80GB",
    "A100-SXM4-80GB": "A100-80GB",
    "A100-SXM4-40GB": "A100-40GB",
    "H100": "H100-SXM",
    "H100-80GB-HBM3": "H100-SXM",
    "H200-SXM": "H200",
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA H200": "H200",
    "NVIDIA GB200": "GB200",
    "RTX4090": "RTX-4090",
    "NVIDIA GeForce RTX 4090": "RTX-4090",
    "NVIDIA A40": "A40",
    "AMD Instinct MI300X": "MI300X",
}


def get_hardware(name: str) -> Hardware:
    """A datasheet row by name; an unknown name raises RLBenchError with the nearest one."""
    if name.strip().lower() == "cpu":
        raise RLBenchError(
            "hardware 'cpu' has no datasheet row; build it with cpu_hardware(peak_flops, mem_bw) "
            "from numbers measured on this machine"
        )
    return lookup(HARDWARE, name, "hardware", _ALIASES)


def find_hardware(name: str) -> Hardware | None:
    """Like get_hardware, but None for an unknown device, for reports that print n/a."""
    try:
        return get_hardware(name)
    except RLBenchError:  # unknown device -> n/a, never a guessed peak
        return None


def _grid(rates) -> tuple[tuple[int, int, float], ...]:
    return tuple((int(m), int(k), float(r)) for m, k, r in rates)


def cpu_hardware(
    peak_flops: float,
    mem_bw: float,
    *,
    op_latency_s: float | None = None,
    matmul_rates: tuple[tuple[int, int, float], ...] = (),
    train_matmul_rates: tuple[tuple[int, int, float], ...] = (),
    streamed_matmul_rates: tuple[tuple[int, int, float], ...] = (),
    cache_bytes: float | None = None,
    mem_bytes: float | None = None,
    tdp_w: float | None = None,
    usd_per_hour: float | None = None,
    name: str = "cpu",
    source: str = "measured at run time",
) -> Hardware:
    """A 'cpu' row from a run-time probe (matmul FLOP/s, copy bandwidth, per-layer op latency).

    It has one device. Multi-device communication on a CPU row has no link bandwidth, so any
    predicted collective comes out None rather than a guess. Dispatch does not overlap the
    arithmetic on a CPU (overlaps_latency=False), so stage times are W/p + D * op_latency_s.
    `matmul_rates` / `train_matmul_rates` are the probe's FLOP/s by shape (rows, dim), forward and
    forward + backward, used for each stage's shape; `streamed_matmul_rates` the forward rate on
    weights beyond `cache_bytes`, used where a pass's weights do not fit there.
    """
    return Hardware(
        name=name,
        bf16_flops=float(peak_flops),
        fp32_flops=float(peak_flops),
        hbm_bytes_per_s=float(mem_bw),
        hbm_bytes=mem_bytes,
        intra_node_bytes_per_s=None,
        inter_node_bytes_per_s=None,
        tdp_w=tdp_w,
        usd_per_gpu_hour=usd_per_hour,
        gpus_per_node=1,
        op_latency_s=None if op_latency_s is None else float(op_latency_s),
        overlaps_latency=False,
        matmul_rates=_grid(matmul_rates),
        train_matmul_rates=_grid(train_matmul_rates),
        streamed_matmul_rates=_grid(streamed_matmul_rates),
        cache_bytes=None if cache_bytes is None else float(cache_bytes),
        source=source,
    )


def with_price(hw: Hardware, usd_per_gpu_hour: float | None) -> Hardware:
    """The same row with another default price."""
    return replace(hw, usd_per_gpu_hour=usd_per_gpu_hour)
