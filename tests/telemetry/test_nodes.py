"""Per-node telemetry and idle nodes on synthetic tables of fixed values, against hand-computed numbers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rlbench.harness.telemetry import idle_nodes, per_node_summary
from rlbench.harness.telemetry.nodes import IDLE_SHARE, MIN_BUSY_PCT, SUMMARY_COLUMNS, node_order, nodes_of

TICKS = (0.0, 1.0, 2.0, 3.0)


def _gpu(node: str | None, host: str, device: int, util: float, watts: float, mem_gb: float) -> list[dict]:
    return [
        {
            "time_unix_s": t,
            "node": node,
            "host": host,
            "source": "gpu",
            "device": device,
            "gpu_util_pct": util + t,  # util, util + 1, ...: a mean of util + 1.5
            "power_w": watts,
            "mem_used_gb": mem_gb + t,
        }
        for t in TICKS
    ]


def _host(node: str | None, host: str, proc_cpu: float, rss_gb: float, procs: int) -> list[dict]:
    return [
        {
            "time_unix_s": t,
            "node": node,
            "host": host,
            "source": "host",
            "device": -1,
            "cpu_util_pct": 50.0,
            "proc_cpu_util_pct": proc_cpu,
            "proc_rss_gb": rss_gb * (1 + t) / 4,  # rises to rss_gb at the last tick
            "proc_count": procs - 1 + (t == 3.0),  # procs at the last tick only
        }
        for t in TICKS
    ]


def _cluster(node1_util: float = 60.0, node1_cpu: float = 150.0) -> pd.DataFrame:
    """A driver, node0 (2 GPUs) and node1 (1 GPU) on two hosts; node1 busy at `node1_util`."""
    return pd.DataFrame(
        _host("driver", "head", 30.0, 0.5, 1)
        + _host("node0", "head", 200.0, 8.0, 5)
        + _gpu("node0", "head", 0, 80.0, 300.0, 20.0)
        + _gpu("node0", "head", 1, 90.0, 350.0, 30.0)
        + _host("node1", "worker", node1_cpu, 4.0, 3)
        + _gpu("node1", "worker", 0, node1_util, 250.0, 10.0)
    )


def test_one_row_per_node_with_hand_computed_values():
    summary = per_node_summary(_cluster()).set_index("node")
    assert list(summary.index) == ["driver", "node0", "node1"]
    assert tuple(summary.reset_index().columns) == SUMMARY_COLUMNS
    node0 = summary.loc["node0"]
    assert node0["host"] == "head" and node0["samples"] == 4 * 3 and node0["gpus"] == 2
    assert node0["gpu_util_mean_pct"] == pytest.approx(86.5)  # (81.5 + 91.5) / 2
    assert node0["gpu_mem_peak_gb"] == 33.0  # GPU 1 at t = 3
    assert node0["power_mean_w"] == pytest.approx(650.0)  # summed over its GPUs
    assert node0["proc_cpu_mean_pct"] == 200.0 and node0["proc_rss_peak_gb"] == 8.0 and node0["proc_count_max"] == 5
    driver = summary.loc["driver"]
    assert driver["gpus"] == 0 and driver["samples"] == 4
    assert math.isnan(driver["gpu_util_mean_pct"]) and math.isnan(driver["power_mean_w"])
    assert summary.loc["node1", "gpu_util_mean_pct"] == pytest.approx(61.5)


def test_a_table_without_a_node_column_is_one_local_node():
    table = _cluster().drop(columns=["node"])
    summary = per_node_summary(table)
    assert summary["node"].tolist() == ["local", "local"]  # one row per host: "head" and "worker"
    assert summary["gpus"].tolist() == [2, 1]
    assert nodes_of(table) == ["local"]
    assert idle_nodes(per_node_summary(table[table["host"] == "head"])) == []


def test_null_nodes_are_local_and_missing_columns_are_nan():
    table = pd.DataFrame(_host(None, "h", 100.0, 2.0, 2)).drop(columns=["proc_count"])
    (row,) = per_node_summary(table).to_dict("records")
    assert row["node"] == "local" and row["proc_cpu_mean_pct"] == 100.0 and math.isnan(row["proc_count_max"])
    with pytest.raises(ValueError, match="source"):
        per_node_summary(table.drop(columns=["source"]))
    assert per_node_summary(table.iloc[0:0]).empty


def test_nodes_sort_by_number():
    names = ["node10", "node2", "driver", "node0", "zeta"]
    assert sorted(names, key=node_order) == ["driver", "node0", "node2", "node10", "zeta"]


def test_a_gpu_node_idling_while_another_works_is_flagged_with_numbers():
    assert idle_nodes(per_node_summary(_cluster())) == []  # 61.5% against 86.5%: slower, not idle
    (flag,) = idle_nodes(per_node_summary(_cluster(node1_util=3.0)))
    assert flag["node"] == "node1" and flag["metric"] == "gpu_util_mean_pct"
    assert flag["value"] == pytest.approx(4.5) and flag["busiest_node"] == "node0"
    assert flag["busiest_value"] == pytest.approx(86.5)
    assert "4.5%" in flag["why"] and "86.5%" in flag["why"] and "node0" in flag["why"]
    assert set(flag) == {"node", "metric", "value", "busiest_node", "busiest_value", "why"}


def test_the_threshold_is_a_share_of_the_busiest_node():
    # node0 averages 86.5%: node1 at exactly IDLE_SHARE of it is not idle, just below it is
    edge = IDLE_SHARE * 86.5 - 1.5  # gpu_util_pct rises by 1.5 on average over the ticks
    assert idle_nodes(per_node_summary(_cluster(node1_util=edge))) == []
    assert [f["node"] for f in idle_nodes(per_node_summary(_cluster(node1_util=edge - 0.5)))] == ["node1"]


def test_nobody_busy_means_nobody_idle():
    quiet = pd.DataFrame(
        _gpu("node0", "a", 0, MIN_BUSY_PCT - 3.0, 100.0, 1.0) + _gpu("node1", "b", 0, 0.0, 100.0, 1.0)
    )  # node0 averages MIN_BUSY_PCT - 1.5
    assert idle_nodes(per_node_summary(quiet)) == []


def test_cpu_nodes_are_compared_by_framework_cpu_and_the_driver_is_ignored():
    table = pd.DataFrame(
        _host("driver", "a", 1.0, 0.5, 1) + _host("node0", "a", 400.0, 2.0, 4) + _host("node1", "b", 20.0, 2.0, 4)
    )
    (flag,) = idle_nodes(per_node_summary(table))
    assert flag["node"] == "node1" and flag["metric"] == "proc_cpu_mean_pct" and flag["busiest_value"] == 400.0
    assert "20.0% of one core" in flag["why"] and "5%" in flag["why"]
    # two nodes on one host: only node0 sampled the GPUs, so the nodes are compared by framework CPU
    shared = pd.concat([table, pd.DataFrame(_gpu("node0", "a", 0, 90.0, 300.0, 10.0))])
    assert [f["metric"] for f in idle_nodes(per_node_summary(shared))] == ["proc_cpu_mean_pct"]
    # one worker beside the driver: nothing to compare
    assert idle_nodes(per_node_summary(table[table["node"] != "node1"])) == []
