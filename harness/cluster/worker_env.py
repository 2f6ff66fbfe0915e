"""The run's environment for the framework's workers on a running Ray cluster.

On a cluster the frameworks' Ray workers are started by each node's raylet and never see the environment of
the driver rlbench launches (on one host the framework starts Ray itself, and its raylet inherits it). Ray's
own channel for this is the job config a job's driver finds in RAY_JOB_CONFIG_JSON_ENV_VAR (what `ray job
submit` sets): `ray.init` merges its runtime_env into the one the framework passes, variable by variable, and
with RAY_OVERRIDE_JOB_RUNTIME_ENV=1 the framework's own value wins where both set one. So verl and OpenRLHF
need no change: every variable rlbench sets for the run (log destinations, NCCL's debug file, a CPU lane's
settings) reaches their workers on every node.

    python -c "from rlbench.harness.cluster.worker_env import cluster_env; print(cluster_env({'A': '1'}, 'h:6379'))"
"""

from __future__ import annotations

import json
import os

JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # ray._private.runtime_env.constants.RAY_JOB_CONFIG_JSON_ENV_VAR
OVERRIDE_ENV = "RAY_OVERRIDE_JOB_RUNTIME_ENV"


def cluster_env(run_env: dict[str, str], address: str) -> dict[str, str]:
    """`run_env` plus what makes the framework's driver join `address` and hand `run_env` to its workers (Ray's
    own variables stay the driver's: a worker has its raylet's). A job config already set (rlbench itself
    running as a Ray job) keeps its settings; the run's variables are added to it."""
    try:
        config = json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}")
    except ValueError:
        config = {}
    runtime_env = dict(config.get("runtime_env") or {})
    forwarded = {name: value for name, value in run_env.items() if not name.startswith("RAY_")}
    runtime_env["env_vars"] = {**(runtime_env.get("env_vars") or {}), **forwarded}
    config["runtime_env"] = runtime_env
    return {**run_env, "RAY_ADDRESS": address, JOB_CONFIG_ENV: json.dumps(config), OVERRIDE_ENV: "1"}
