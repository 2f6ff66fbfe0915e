"""Loaded by Python at start-up in every process of a CPU-lane run (this folder is on PYTHONPATH).

It only applies the shims of the lane named in $RLBENCH_CPU_LANE; see rlbench.adapters.cpu_lane.
"""

import os

if os.environ.get("RLBENCH_CPU_LANE"):
    from rlbench.adapters.cpu_lane import boot

    boot()
