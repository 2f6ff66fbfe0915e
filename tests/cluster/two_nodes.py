"""A CPU lane's framework across a 2-node Ray cluster on loopback, and what its record must show.

Each node declares 2 logical GPUs (verl, run disaggregated with its one-step-off trainer, places one FSDP worker
and one vLLM server of its rollout pool per node; OpenRLHF packs its two actor ranks on one node and its two vLLM
engines on the other). The run is `rlbench run
--parallel nodes=2 --parallel dp=2 --ray-address ...` from outside the cluster, as a user's would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rlbench.harness.record.read import read_record
from tests.conftest import run_lane
from tests.loopback.ray_cluster import loopback_ray

NODES = 2


# verl's 2-node run generates the tail workload's geometric lengths, so its lane runs a length tail in CI without a
# run of its own (workloads/tail.py). OpenRLHF's stays at the fixed-length workload: on 2 nodes (dp=2, ZeRO-3 over
# gloo) its actor's weights leave its first optimizer step corrupt (the weight-sync checksum jumps from 6.5e4 to
# 6.8e18 with zero advantages), which only a run whose lengths depend on the weights shows.
TAIL = "gsm8k-grpo-tiny-tail"
TAIL_FRAMEWORKS = ("verl",)


def run_on_two_nodes(framework: str, out: Path, timeout_s: int, *extra: str) -> Path:
    # 16 logical CPUs a node: verl's one-step-off TaskRunner asks Ray for 10 (logical: placement only).
    with loopback_ray(nodes=NODES, num_cpus=16, num_gpus=2, timeout_s=180) as ray:
        return run_lane(
            framework,
            out,
            timeout_s,
            "--parallel",
            f"nodes={NODES}",
            "--parallel",
            f"dp={NODES}",
            *extra,
            "--ray-address",
            ray.gcs_address,
            env=ray.client_env(),
            evaluate=False,  # the held-out evaluation is checked on one node (the lane files)
            workload=TAIL if framework in TAIL_FRAMEWORKS else "gsm8k-grpo-tiny",
        )


def check_two_node_record(run_dir: Path) -> pd.DataFrame:
    """The record of a 2-node run: succeeded, the layout and the cluster described, and telemetry from the driver
    and from both nodes, each node running framework processes. Returns the telemetry table."""
    record = read_record(run_dir)
    assert record["status"] == "succeeded", record["error"]
    assert record["steps"]["step"].tolist() == [1, 2]
    assert (record["parallel"]["nodes"], record["parallel"]["dp"]) == (NODES, NODES)
    cluster = record["cluster"]
    assert [n["label"] for n in cluster["nodes"]] == ["node0", "node1"] and cluster["nodes"][0]["head"]
    assert all(n["gpus"] == 2 and n["ip"] == "127.0.0.1" and n["packages"]["rlbench"] for n in cluster["nodes"])
    assert cluster["ray_version"] and cluster["placement"] and cluster["differences"] == []
    assert cluster["machines"] == 1  # two Ray nodes, one machine: its GPUs would be sampled once
    assert cluster["node_rows"] > 0 and cluster["notes"] == []
    # every node's rows align to the steps (verl's stand-in boundaries included): per-step telemetry for each step
    assert "error" not in record["telemetry"], record["telemetry"]
    assert record["steps"]["proc_cpu_util_mean_pct"].notna().all()
    assert {n["node"] for n in record["telemetry"]["nodes"]} == {"driver", "node0", "node1"}
    assert [line for line in record.get("data_errors", []) if "mfu" not in line] == []  # CPU within the cores
    if record["workload"]["name"] == TAIL:
        check_tail(record)
    prediction = json.loads((run_dir / "prediction.json").read_text())  # said why not, not a knob error
    assert not prediction["available"] and "share its cores" in prediction["reason"]
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    assert set(telemetry["node"]) == {"driver", "node0", "node1"}
    hosts = telemetry[telemetry["source"] == "host"]
    for node in ("node0", "node1"):  # the framework's Ray workers ran and worked on both nodes
        rows = hosts[hosts["node"] == node]
        assert rows["proc_count"].max() >= 2 and rows["proc_cpu_util_pct"].max() > 10, node
    return telemetry


def check_tail(record: dict) -> None:
    """A tail workload's record: each step's lengths as the framework generated them, ended at the end of text
    (so below the cap on average, with few clipped), beside the distribution the workload declares."""
    lengths = record["response_lengths"]
    declared = lengths["declared"]
    assert declared is not None and declared["end_probability"] == 0.0625 and lengths["fixed_length"] is False
    assert lengths["n"] == 2 and [row["step"] for row in lengths["steps"]] == [1, 2]
    for row in lengths["steps"]:  # 32 responses of mean 15.7: a mean of 32 or more is 8 standard errors away
        assert 1 <= row["mean"] < 32 and row["clipped_share"] < 0.25, row
    assert record["equal_work"]["lengths"].startswith("sampled to the end of text from one declared distribution")
