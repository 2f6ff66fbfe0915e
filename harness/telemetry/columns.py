"""The columns of `telemetry.parquet`: name, unit and meaning, in one place.

One row is one reading of one source at one tick: `source == "host"` rows carry
the host and process-tree columns (device -1), `source == "gpu"` rows carry the
NVML columns (device = NVML index). Columns of the other source are null.

    python -c "from rlbench.harness.telemetry.columns import COLUMNS; print(*COLUMNS, sep='\\n')"
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    name: str
    kind: str  # "float", "int" or "str": the parquet type
    unit: str
    description: str


COLUMNS: tuple[Column, ...] = (
    Column("time_unix_s", "float", "unix s", "wall clock of the reading (time.time())"),
    Column("host", "str", "", "socket.gethostname() of the sampler"),
    Column(
        "node",
        "str",
        "",
        "where the row was sampled: 'local' (a one-node run); on a Ray cluster 'driver' (the host rlbench runs on, "
        "its process tree) or 'node0', 'node1', ... (each Ray node, head first: run.json cluster.nodes[].label)",
    ),
    Column("source", "str", "", "'host' or 'gpu'"),
    Column("device", "int", "", "NVML GPU index (not the CUDA_VISIBLE_DEVICES ordinal); -1 for host rows"),
    # host rows
    Column("cpu_util_pct", "float", "%", "system-wide CPU utilisation, 0-100 over all cores"),
    Column(
        "proc_cpu_util_pct",
        "float",
        "% of one core",
        "CPU time of the framework's process tree per wall second x 100 (800 = 8 busy cores); at most 100 x the "
        "host's logical cores (host_probe.py: a process found late is credited its share of the tick)",
    ),
    Column("proc_rss_gb", "float", "GB (1e9 B)", "sum of RSS over the process tree (shared pages counted per process)"),
    Column(
        "proc_pss_gb",
        "float",
        "GB (1e9 B)",
        "sum of PSS over the process tree (each shared page divided among its sharers: within host memory in use); "
        "read once a second, null on the ticks between",
    ),
    Column("proc_count", "int", "", "processes in the tree at this tick"),
    Column("host_mem_used_gb", "float", "GB (1e9 B)", "host memory in use (psutil total - available)"),
    # gpu rows
    Column("gpu_util_pct", "float", "%", "NVML utilization.gpu: share of time a kernel was running"),
    Column("mem_util_pct", "float", "%", "NVML utilization.memory: share of time device memory was read/written"),
    Column("mem_used_gb", "float", "GB (1e9 B)", "device memory in use (all processes)"),
    Column("power_w", "float", "W", "board power (nvmlDeviceGetPowerUsage; an average over ~1 s on recent GPUs)"),
    Column("energy_j", "float", "J", "cumulative energy since the driver loaded (nvmlDeviceGetTotalEnergyConsumption)"),
    Column("sm_clock_mhz", "float", "MHz", "current SM clock"),
    Column("mem_clock_mhz", "float", "MHz", "current memory clock"),
    Column("temperature_c", "float", "C", "GPU core temperature"),
    Column("throttle_reasons", "int", "bitmask", "nvmlClocksEventReason* bits (0 = not throttled, 1 = idle)"),
    Column("pcie_tx_mb_s", "float", "MB/s", "PCIe TX over NVML's ~20 ms window; read at most once a second"),
    Column("pcie_rx_mb_s", "float", "MB/s", "PCIe RX over NVML's ~20 ms window; read at most once a second"),
    Column("nvlink_tx_mb_s", "float", "MB/s", "NVLink data TX summed over links, from counter deltas between ticks"),
    Column("nvlink_rx_mb_s", "float", "MB/s", "NVLink data RX summed over links, from counter deltas between ticks"),
)

LOCAL_NODE = "local"  # the `node` of a one-node run's rows, and of rows recorded before the column existed
DRIVER_NODE = "driver"  # on a cluster: the sampler of the host rlbench runs on

NAMES: tuple[str, ...] = tuple(column.name for column in COLUMNS)


def arrow_schema():  # -> pyarrow.Schema; pyarrow is imported only when a file is written
    """The fixed parquet schema, so that a chunk with no GPU rows has the same types as one with."""
    import pyarrow as pa

    types = {"float": pa.float64(), "int": pa.int64(), "str": pa.string()}
    return pa.schema([pa.field(column.name, types[column.kind]) for column in COLUMNS])
