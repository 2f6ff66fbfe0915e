"""The hardware row of a multi-node job: a node holds the job's GPUs / `nodes` (or `gpus_per_node`).

The model decides which collectives cross nodes by the row's GPUs per node (perfmodel/comm.py), so a job
of 16 GPUs spread over `--parallel nodes=4` prices its groups of more than 4 ranks over the NICs, whatever
the row's own machine holds.

    rlbench predict --model Qwen/Qwen2.5-7B --workload math-grpo --hardware H100-SXM --gpus 16 --parallel nodes=2
"""

from __future__ import annotations

import dataclasses

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import Hardware
from rlbench.harness.spec.parallel import Parallelism


def on_nodes(hardware: Hardware, parallel: Parallelism, gpus: int) -> Hardware:
    """`hardware` with the job's GPUs per node: `gpus_per_node` when given, else `gpus` / `nodes` for a
    multi-node job; a one-node job without the knob keeps the row's own count."""
    if parallel.nodes > 1 and gpus % parallel.nodes:
        raise RLBenchError(
            f"--parallel nodes={parallel.nodes}: the job's {gpus} GPUs do not split evenly over "
            f"{parallel.nodes} nodes; use a node count that divides {gpus}"
        )
    if parallel.gpus_per_node is not None:
        per_node = parallel.gpus_per_node
        if parallel.nodes * per_node < gpus:
            raise RLBenchError(
                f"--parallel gpus_per_node={per_node}: {parallel.nodes} node(s) of {per_node} GPUs hold fewer "
                f"than the job's {gpus}; raise nodes"
            )
    elif parallel.nodes > 1:
        per_node = gpus // parallel.nodes
    else:
        return hardware
    return dataclasses.replace(hardware, gpus_per_node=per_node)
