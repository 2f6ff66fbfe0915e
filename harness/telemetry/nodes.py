"""Per-node telemetry of a multi-node (Ray cluster) run, and the nodes that sat idle while others worked.

Pure, on the recorded `telemetry.parquet` table (columns in
`rlbench.harness.telemetry.columns`): `per_node_summary` gives one row per node
(what its GPUs and the framework's processes on it did over the whole run),
`idle_nodes` flags a node whose work was idle while another node's was not. A
table without a `node` column (a one-node run, or one recorded before the
column) is all `columns.LOCAL_NODE`.

    python -c "import pandas as pd; from rlbench.harness.telemetry.nodes import per_node_summary, idle_nodes; \\
        s = per_node_summary(pd.read_parquet('runs/x/telemetry.parquet')); print(s, idle_nodes(s), sep='\\n')"
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

from rlbench.harness.telemetry.columns import DRIVER_NODE, LOCAL_NODE, NAMES

REQUIRED_COLUMNS = ("host", "source", "device")

SUMMARY_COLUMNS = (
    "node",
    "host",
    "samples",
    "gpus",
    "gpu_util_mean_pct",
    "gpu_mem_peak_gb",
    "power_mean_w",
    "proc_cpu_mean_pct",
    "proc_rss_peak_gb",
    "proc_pss_peak_gb",
    "proc_count_max",
)

# A node is idle below this share of the busiest node's mean: a straggler that is merely slower (a longer
# generation, an uneven shard) still works at half the busiest node's rate or more, while a node with no work
# placed on it idles at a few percent of it.
IDLE_SHARE = 0.25
# ... and only when the busiest node itself worked: at least this mean (% GPU utilisation, or % of one core
# for the framework's processes on CPU). Below it every node idles (a run that never started its work, or
# one dominated by waiting), and a ratio of two near-zero means says nothing.
MIN_BUSY_PCT = 10.0


def with_node(telemetry: pd.DataFrame) -> pd.DataFrame:
    """The table with a `node` column in which absent or null readings are `LOCAL_NODE`."""
    if "node" not in telemetry.columns:
        return telemetry.assign(node=LOCAL_NODE)
    # object first: an all-null column reads back as float, which a string cannot fill
    return telemetry.assign(node=telemetry["node"].astype(object).fillna(LOCAL_NODE).astype(str))


def node_order(node: str) -> tuple[int, int, str]:
    """Sort key: the driver, a one-node run's 'local', then node0, node1, ..., node10 by number, then the rest."""
    if node == DRIVER_NODE:
        return (0, 0, node)
    if node == LOCAL_NODE:
        return (1, 0, node)
    match = re.fullmatch(r"node(\d+)", node)
    return (2, int(match.group(1)), node) if match else (3, 0, node)


def nodes_of(telemetry: pd.DataFrame) -> list[str]:
    """The distinct nodes of a telemetry table, in `node_order`."""
    return sorted(set(with_node(telemetry)["node"]), key=node_order)


def by_node(telemetry: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(node, its rows) for each node of the table, in `node_order`: one line per node in a figure."""
    table = with_node(telemetry)
    return [(node, table[table["node"] == node]) for node in sorted(set(table["node"]), key=node_order)]


def _summary_row(node: str, host: str, rows: pd.DataFrame) -> dict[str, Any]:
    gpu, host_rows = rows[rows["source"] == "gpu"], rows[rows["source"] == "host"]
    per_gpu_power = gpu.groupby("device")["power_w"].mean()
    return {
        "node": node,
        "host": host,
        "samples": len(rows),
        "gpus": int(gpu["device"].dropna().nunique()),
        "gpu_util_mean_pct": gpu["gpu_util_pct"].mean(),
        "gpu_mem_peak_gb": gpu["mem_used_gb"].max(),
        "power_mean_w": per_gpu_power.sum(min_count=1),
        "proc_cpu_mean_pct": host_rows["proc_cpu_util_pct"].mean(),
        "proc_rss_peak_gb": host_rows["proc_rss_gb"].max(),
        "proc_pss_peak_gb": host_rows["proc_pss_gb"].max() if "proc_pss_gb" in host_rows else math.nan,
        "proc_count_max": host_rows["proc_count"].max(),
    }


def per_node_summary(telemetry: pd.DataFrame) -> pd.DataFrame:
    """One row per sampler, i.e. per node (and host, should one node label span hosts), in `node_order`.

    samples: telemetry rows of the node (host and GPU readings). gpus: distinct
    devices with GPU rows (on a host shared by several Ray nodes only the first
    samples the GPUs, so the others show 0). gpu_util_mean_pct: mean over the
    node's GPUs and samples. gpu_mem_peak_gb: largest single-GPU memory in use.
    power_mean_w: sum over the node's GPUs of each GPU's mean board power.
    proc_cpu_mean_pct: the framework's processes on the node, mean CPU in % of
    one core. proc_rss_peak_gb: their peak summed RSS. proc_count_max: most
    processes at one tick. NaN where the node has no such reading.
    """
    missing = [column for column in REQUIRED_COLUMNS if column not in telemetry.columns]
    if missing:
        raise ValueError(f"telemetry table lacks column(s) {missing}")
    # a reading nobody recorded (an older sampler, a CPU-only host) is simply empty
    table = with_node(telemetry.assign(**{name: np.nan for name in NAMES if name not in telemetry.columns}))
    rows = [_summary_row(node, host, part) for (node, host), part in table.groupby(["node", "host"], sort=False)]
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    if summary.empty:
        return summary
    order = sorted(range(len(summary)), key=lambda i: (node_order(summary["node"][i]), str(summary["host"][i])))
    summary = summary.iloc[order].reset_index(drop=True)
    for column in SUMMARY_COLUMNS[4:]:
        summary[column] = summary[column].astype(float)
    return summary


def _finite(value: Any) -> bool:
    return value is not None and isinstance(value, (int, float, np.number)) and math.isfinite(value)


def _compared(workers: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """(metric, nodes measured by it): GPU utilisation where two or more nodes sampled GPUs, else the framework's
    CPU (a node on a host whose GPUs another node agent samples has no GPU rows of its own)."""
    with_gpus = workers[(workers["gpus"] > 0) & workers["gpu_util_mean_pct"].map(_finite)]
    if len(with_gpus) >= 2:
        return "gpu_util_mean_pct", with_gpus
    return "proc_cpu_mean_pct", workers[workers["proc_cpu_mean_pct"].map(_finite)]


def _why(metric: str, node: str, value: float, busiest: str, busiest_value: float) -> str:
    share = f"{value / busiest_value:.0%} of the busiest node's, below the {IDLE_SHARE:.0%} idle threshold"
    if metric == "gpu_util_mean_pct":
        return (
            f"{node}'s GPUs averaged {value:.1f}% utilisation while {busiest}'s averaged {busiest_value:.1f}% "
            f"({share}): work was placed unevenly or {node} waited on the others."
        )
    return (
        f"The framework's processes on {node} used {value:.1f}% of one core on average while {busiest}'s used "
        f"{busiest_value:.1f}% ({share}): work was placed unevenly or {node} waited on the others."
    )


def idle_nodes(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The nodes whose work idled while another node's did not, from `per_node_summary`.

    A node is flagged when its mean is below IDLE_SHARE of the busiest node's and
    the busiest is at least MIN_BUSY_PCT (GPU utilisation in %, or the framework's
    CPU in % of one core where fewer than two nodes sampled GPUs). The driver is
    left out: it runs only the framework's driver. Fewer than two other nodes: [].
    Each flag: {node, metric, value, busiest_node, busiest_value, why}.
    """
    if summary.empty:
        return []
    workers = summary[summary["node"] != DRIVER_NODE]
    if len(workers) < 2:
        return []
    metric, measured = _compared(workers)
    if len(measured) < 2:
        return []
    top = measured.loc[measured[metric].idxmax()]
    busiest, busiest_value = str(top["node"]), float(top[metric])
    if busiest_value < MIN_BUSY_PCT:
        return []
    flags = []
    for _, row in measured.iterrows():
        value = float(row[metric])
        if value < IDLE_SHARE * busiest_value:
            node = str(row["node"])
            flags.append(
                {
                    "node": node,
                    "metric": metric,
                    "value": value,
                    "busiest_node": busiest,
                    "busiest_value": busiest_value,
                    "why": _why(metric, node, value, busiest, busiest_value),
                }
            )
    return flags
