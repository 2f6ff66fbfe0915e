"""The node agent's work, run as a plain object (on a cluster each is a Ray actor pinned to its node), and the
environment a framework's driver gets to hand the run's settings to a running cluster's workers."""

from __future__ import annotations

import json
import os
import time

from rlbench.harness.cluster.node_agent import NodeAgent
from rlbench.harness.cluster.worker_env import JOB_CONFIG_ENV, OVERRIDE_ENV, cluster_env


def test_stage_writes_only_what_differs(tmp_path):
    agent = NodeAgent("node1")
    same, other = tmp_path / "same.txt", tmp_path / "deep" / "missing.bin"
    same.write_text("prompts")
    written = agent.stage({str(same): b"prompts", str(other): b"\x00model"})
    assert written == [str(other)] and other.read_bytes() == b"\x00model"
    assert agent.stage({str(other): b"\x00model"}) == []  # a second run finds it there
    assert agent.stage({str(same): b"changed"}) == [str(same)] and same.read_text() == "changed"


def test_collect_brings_back_what_the_driver_lacks_unless_it_shares_the_files(tmp_path):
    agent = NodeAgent("node1")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "nccl.host2.77").write_text("NCCL INFO ...")
    (tmp_path / "framework_metrics.jsonl").write_text("{}\n")
    got = agent.collect(str(tmp_path), {"framework_metrics.jsonl": 3}, token="abc")
    assert got == {"logs/nccl.host2.77": b"NCCL INFO ..."}
    (tmp_path / ".rlbench-driver").write_text("abc")  # the driver's own marker: this node shares its files
    assert agent.collect(str(tmp_path), {}, token="abc") == {}
    assert agent.collect(str(tmp_path / "absent"), {}, token="abc") == {}


def test_describe_names_the_machine_and_the_packages():
    info = NodeAgent("node0").describe()
    assert info["label"] == "node0" and info["cpu_count"] >= 1 and info["memory_gb"] > 0
    assert info["machine"].startswith(info["hostname"] + "/")
    assert "rlbench" in info["packages"] and info["python"]


def test_sampling_follows_a_raylets_descendants(tmp_path):
    """Outside Ray there is no raylet above the agent: it says so rather than sample the wrong tree."""
    agent = NodeAgent("node0")
    assert agent.raylet is None and agent.start_sampling(10.0, sample_gpus=False) is False
    assert agent.stop_sampling() == []


def test_sampling_rows_carry_the_node(monkeypatch):
    import psutil

    agent = NodeAgent("node3")
    agent.raylet = psutil.Process(os.getppid())  # stand-in: any live ancestor
    assert agent.start_sampling(50.0, sample_gpus=False)
    time.sleep(0.3)
    rows = agent.stop_sampling()
    assert rows and {r["node"] for r in rows} == {"node3"} and {r["source"] for r in rows} == {"host"}
    assert all("proc_cpu_util_pct" in r for r in rows)


def test_the_run_environment_travels_in_rays_job_config(monkeypatch):
    monkeypatch.delenv(JOB_CONFIG_ENV, raising=False)
    env = cluster_env({"VERL_FILE_LOGGER_PATH": "/r/m.jsonl", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}, "h:6379")
    assert env["RAY_ADDRESS"] == "h:6379" and env[OVERRIDE_ENV] == "1"
    forwarded = json.loads(env[JOB_CONFIG_ENV])["runtime_env"]["env_vars"]
    assert forwarded == {"VERL_FILE_LOGGER_PATH": "/r/m.jsonl"}  # Ray's own settings stay the driver's
    # rlbench inside a Ray job: the job's own config is kept, the run's variables added
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {"env_vars": {"A": "1"}, "pip": ["x"]}}))
    config = json.loads(cluster_env({"B": "2"}, "h:6379")[JOB_CONFIG_ENV])
    assert config["runtime_env"] == {"env_vars": {"A": "1", "B": "2"}, "pip": ["x"]}
