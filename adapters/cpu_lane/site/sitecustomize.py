"""Loaded by Python at start-up in every process of a run whose framework processes have this folder on PYTHONPATH.

It applies the CPU-lane shims of the framework named in $RLBENCH_CPU_LANE and rlbench's own hooks of the module
named in $RLBENCH_HOOKS (both may be set); see rlbench.adapters.cpu_lane.boot.
"""

import os

if os.environ.get("RLBENCH_CPU_LANE") or os.environ.get("RLBENCH_HOOKS"):
    from rlbench.adapters.cpu_lane import boot

    boot()
