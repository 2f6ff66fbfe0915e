"""Multi-node layouts without a cluster: the node knobs, their refusals, each framework's multi-node launch
(a dry run plans it anywhere), the check against a cluster's nodes, and the model's GPUs per node."""

from __future__ import annotations

import pytest

from rlbench.harness.cluster.ray_cluster import ClusterNode, check_fits
from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import get_hardware
from rlbench.harness.predict.nodes import on_nodes
from rlbench.harness.spec.parallel import check_nodes, parse_parallel
from rlbench.harness.spec.runspec import check_ray_address
from tests.conftest import run_cli


def test_node_knobs_parse_and_default():
    p = parse_parallel(["nodes=4", "dp=32", "gpus_per_node=8"])
    assert (p.nodes, p.gpus_per_node, p.gpus_on_each_node(32)) == (4, 8, 8)
    assert parse_parallel([]).nodes == 1 and parse_parallel([]).gpus_per_node is None
    with pytest.raises(RLBenchError, match="nodes=0: must be a positive integer"):
        parse_parallel(["nodes=0"])


def test_a_layout_that_does_not_split_over_the_nodes_is_refused():
    check_nodes(parse_parallel(["nodes=2", "dp=4"]), {"trainer": 4, "rollout pool": 0})
    with pytest.raises(RLBenchError, match="trainer's 4 GPU.* do not split evenly over 3 nodes"):
        check_nodes(parse_parallel(["nodes=3", "dp=4"]), {"trainer": 4})
    with pytest.raises(RLBenchError, match="gpus_per_node=4: this layout puts 8 GPUs on each"):
        check_nodes(parse_parallel(["nodes=2", "dp=8", "gpus_per_node=4"]), {"trainer": 8, "rollout pool": 8})


def test_ray_address_forms():
    assert check_ray_address(" 10.0.0.1:6379 ") == "10.0.0.1:6379"
    assert check_ray_address("ray://head:10001") == "ray://head:10001"
    assert check_ray_address("") is None and check_ray_address(None) is None
    for bad in ("10.0.0.1", "head:port", "head:70000"):
        with pytest.raises(RLBenchError, match="expected HOST:PORT"):
            check_ray_address(bad)


def _node(label: str, gpus: int) -> ClusterNode:
    return ClusterNode(label=label, node_id=label * 4, ip="10.0.0.1", gpus=gpus, cpus=8, head=label == "node0")


def test_the_cluster_must_hold_the_layout():
    nodes = [_node("node0", 8), _node("node1", 8), _node("node2", 4)]
    check_fits(nodes, 2, 8, "nodes=2 dp=16")
    with pytest.raises(RLBenchError, match=r"needs 3 node\(s\) with 8 GPU\(s\) each, the Ray cluster has 2 such"):
        check_fits(nodes, 3, 8, "nodes=3 dp=24")


def test_the_model_prices_a_multi_node_job_with_its_gpus_per_node():
    h100 = get_hardware("H100-SXM")
    assert on_nodes(h100, parse_parallel(["dp=8"]), 8) is h100  # one node: the row's own machine
    assert on_nodes(h100, parse_parallel(["nodes=4", "dp=16"]), 16).gpus_per_node == 4
    assert on_nodes(h100, parse_parallel(["nodes=2", "gpus_per_node=8", "dp=16"]), 16).gpus_per_node == 8
    with pytest.raises(RLBenchError, match="hold fewer than the job's 16"):
        on_nodes(h100, parse_parallel(["nodes=1", "gpus_per_node=8", "dp=16"]), 16)


def test_predict_takes_the_node_count():
    """16 GPUs on 4 nodes cross the NICs for dp=16 collectives; on 1 node of 16 (NVL-like) they do not: the
    communication in the model's lower bound grows."""
    import json

    def step_s(*knobs: str) -> float:
        args = ["predict", "--model-config", "Qwen/Qwen2.5-7B", "--workload", "math-grpo", "--hardware", "H100-SXM"]
        result = run_cli(*args, "--gpus", "16", "--json", *[a for k in knobs for a in ("--parallel", k)])
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["step_time_bound_s"]

    assert step_s("dp=16", "nodes=4") > step_s("dp=16", "nodes=1", "gpus_per_node=16")


@pytest.mark.parametrize(
    ("framework", "expected"),
    [
        ("verl", ["trainer.nnodes=4", "trainer.n_gpus_per_node=8"]),
        ("openrlhf", ["--actor.num_nodes 4", "--actor.num_gpus_per_node 8", "--ref.num_nodes 4"]),
    ],
)
def test_dry_run_prints_the_frameworks_multi_node_launch(framework, expected, tmp_path):
    result = run_cli(
        "run", "--framework", framework, "--workload", "math-grpo", "--parallel", "nodes=4", "--parallel", "dp=32",
        "--dry-run", "--ray-address", "10.0.0.1:6379", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for text in expected:
        assert text in result.stdout
    assert "RAY_ADDRESS=10.0.0.1:6379" in result.stdout


def test_trl_refuses_nodes_with_the_reason(tmp_path):
    result = run_cli(
        "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", "--parallel", "nodes=2", "--dry-run",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines() == [result.stderr.strip().splitlines()[0]]
        and "accelerate launch" in result.stderr
    )


def test_a_multi_node_run_without_a_cluster_is_refused(tmp_path):
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.cluster.session import join_for_run
    from rlbench.harness.spec.runspec import build_run_spec

    spec = build_run_spec("verl", "math-grpo", ["nodes=2", "dp=16"], steps=None, seed=0, out=tmp_path)
    with pytest.raises(RLBenchError, match="nodes=2: a multi-node run joins a running Ray cluster; give --ray-address"):
        join_for_run(spec, get_adapter("verl"))


def test_a_clusters_figures_are_per_the_jobs_gpus_of_its_nodes_model():
    """rlbench may run on a host without GPUs: per-GPU figures, the prediction's hardware row and the price come
    from the nodes' GPUs; a CPU lane's cluster (no NVML GPUs) keeps this host's machine."""
    from rlbench.harness.run.job_prediction import job_machine

    here = {"gpus": [], "gpu_count": 0, "cpu": "x"}
    nodes = {"nodes": [{"label": "node0", "gpu_models": {"0": "NVIDIA H100 80GB HBM3"}}, {"label": "node1"}]}
    machine = job_machine(here, nodes, 16)
    assert machine["gpu_count"] == 16 and machine["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert machine["cpu"] == "x" and here["gpu_count"] == 0
    assert job_machine(here, {"nodes": [{"label": "node0", "gpu_models": {}}]}, 2) is here
    assert job_machine(here, None, 2) is here
