"""Multi-node runs in the report: one trace line per node, a Nodes table per run, a line per idle node.

The fast tests draw synthetic tables of fixed values; the slow one renders a report of the real TRL tiny
record (tests/data/records/trl-tiny) whose telemetry is relabelled as a driver and two Ray nodes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.run.profiling import TELEMETRY_FILE, node_notes
from rlbench.reports.figures import telemetry_timeline
from rlbench.reports.html import render_report
from rlbench.reports.load import RunView
from rlbench.reports.tables import node_tables
from rlbench.reports.timeline import timeline_view

T0 = 1_800_000_000.0


def _host_rows(node: str | None, proc_cpu: float, rss_gb: float, host: str = "box") -> list[dict]:
    rows = [
        {
            "time_unix_s": T0 + i * 0.5,
            "host": host,
            "source": "host",
            "device": -1,
            "cpu_util_pct": 60.0,
            "proc_cpu_util_pct": proc_cpu,
            "proc_rss_gb": rss_gb,
            "proc_count": 3,
        }
        for i in range(9)
    ]
    return rows if node is None else [{**row, "node": node} for row in rows]


def _view(telemetry: pd.DataFrame, record_telemetry: dict | None = None, label: str = "trl · tiny") -> RunView:
    steps = pd.DataFrame(
        {
            "step": [1, 2],
            "step_start_unix_s": [T0, T0 + 2.0],
            "step_end_unix_s": [T0 + 2.0, T0 + 4.0],
            "step_time_s": [2.0, 2.0],
        }
    )
    record = {
        "status": "succeeded",
        "framework": {"name": "trl"},
        "workload": {"name": "tiny", "warmup_steps": 1},
        "parallel": {},
        "summary": {},
        "environment": {"cpu_count": 2},
        "telemetry": record_telemetry or {},
    }
    return RunView(Path("/nonexistent"), record, steps, telemetry, None, None, label)


def _cluster() -> pd.DataFrame:
    rows = _host_rows("driver", 5.0, 0.2) + _host_rows("node0", 180.0, 3.0) + _host_rows("node1", 4.0, 1.0)
    return pd.DataFrame(rows)


def test_a_one_node_timeline_is_unchanged_and_a_cluster_draws_a_line_per_node():
    one = timeline_view([_view(pd.DataFrame(_host_rows(None, 180.0, 3.0)))])
    assert "framework process tree: mean 1.8" in one.svg and "whole host (2 cores)" in one.svg
    assert "framework RSS (GB): mean 3" in one.svg and ", node" not in one.svg and "per node" not in one.caption
    cluster = timeline_view([_view(_cluster())])
    for name in ("framework CPU, node0: mean 1.8", "framework CPU, node1: mean 0.04", "framework CPU, driver"):
        assert name in cluster.svg
    assert "framework RSS, node0: mean 3" in cluster.svg and "framework RSS, node1: mean 1" in cluster.svg
    assert "whole host (2 cores)" in cluster.svg  # all three on one host: its reading drawn once
    assert "one line per node" in cluster.caption
    apart = _cluster().assign(host=["a"] * 9 + ["a"] * 9 + ["b"] * 9)
    assert "whole host" not in timeline_view([_view(apart)]).svg  # the driver's core count is not node1's


def test_the_utilisation_figure_draws_a_line_per_node():
    one = telemetry_timeline([_view(pd.DataFrame(_host_rows(None, 180.0, 3.0)))])
    assert one is not None and "one line per node" not in one.caption
    cluster = telemetry_timeline([_view(_cluster())])
    assert cluster is not None and "one line per node" in cluster.caption


def test_the_nodes_table_and_idle_lines_come_from_the_record():
    notes = node_notes(_cluster())
    (idle,) = notes["idle_nodes"]
    assert idle["node"] == "node1"
    (table,) = node_tables([_view(_cluster(), notes), _view(pd.DataFrame(_host_rows(None, 1.0, 1.0)), label="solo")])
    headers, rows = table.table
    assert headers[:4] == ["node", "host", "samples", "GPUs"]
    assert "GPU util (%) ↑" in headers and "framework CPU (% of one core)" in headers
    assert "framework RSS peak (GB) ↓" in headers and headers[-1] == "processes"
    assert rows[1] == ["node0", "box", "9", "0", "–", "–", "–", "180", "–", "3", "3"]  # no PSS in these rows
    assert table.idle == [idle["why"]] and "4.0% of one core" in idle["why"]
    damaged = {"nodes": ["not a node", {"node": "node0", "samples": None}], "idle_nodes": [{"why": ""}]}
    (odd,) = node_tables([_view(_cluster(), damaged)])
    assert odd.table[1] == [["node0", "", "–", "–", "–", "–", "–", "–", "–", "–", "–"]] and odd.idle == []


@pytest.mark.slow
def test_a_report_shows_a_multi_node_run_s_nodes(report_run, tmp_path):
    plain = tmp_path / "plain" / report_run.name
    shutil.copytree(report_run, plain)
    cluster = tmp_path / "cluster" / report_run.name
    shutil.copytree(report_run, cluster)
    host = pd.read_parquet(cluster / TELEMETRY_FILE)
    telemetry = pd.concat(
        [
            host.assign(node="driver", proc_cpu_util_pct=2.0),
            host.assign(node="node0"),
            host.assign(node="node1", time_unix_s=host["time_unix_s"] + 0.05, proc_cpu_util_pct=1.0),
        ],
        ignore_index=True,
    )
    telemetry.to_parquet(cluster / TELEMETRY_FILE)
    record = json.loads((cluster / "run.json").read_text())
    record["telemetry"].update(node_notes(telemetry))
    (cluster / "run.json").write_text(json.dumps(record))
    html = render_report([tmp_path / "cluster"], tmp_path / "cluster.html").read_text()
    assert "<h2>Nodes</h2>" in html and '<table class="sortable nodes">' in html
    assert "<td>node1</td>" in html and "<td>driver</td>" in html
    assert "idle: The framework&#39;s processes on node1 used 1.0% of one core" in html
    assert "framework CPU, node1" in html  # the timeline's hover titles
    assert "<h2>Nodes</h2>" not in render_report([tmp_path / "plain"], tmp_path / "plain.html").read_text()
