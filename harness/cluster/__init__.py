"""Runs across a running Ray cluster: its shape, one telemetry agent per node, inputs out and outputs back.

    rlbench run --framework verl --workload math-grpo --parallel nodes=2 --parallel dp=16 --ray-address 10.0.0.1:6379

`ray_cluster.py` reads the cluster's nodes and checks a layout fits them; `node_agent.py` is the Ray actor
pinned to each node; `session.py` drives the agents for the runner.
"""
