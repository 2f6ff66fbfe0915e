"""verl's metrics destination reaches its Ray actors on an existing Ray cluster (issue 17, rule 5).

A Ray head is started on loopback by this module, from an environment without
VERL_FILE_LOGGER_PATH; a driver process (also without it) runs verl's own `run_ppo`
with RAY_ADDRESS pointing at that head and the overrides the adapter generates. The
task runner is a probe actor that writes to the path it finds in its environment: the
file appears only if the destination travelled in the job's runtime_env.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import free_port, ray_free_port_args, stop_ray_head

pytest.importorskip("verl")
pytest.importorskip("ray")
pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent("""
    import sys
    from pathlib import Path

    import ray
    from hydra import compose, initialize_config_dir

    import verl
    import verl.trainer.main_ppo as main_ppo
    from rlbench.adapters.registry import get_adapter
    from rlbench.run.parallel import Parallelism
    from rlbench.run.spec import RunSpec
    from rlbench.workloads.catalog import load_workload

    @ray.remote(num_cpus=0)
    class Probe:  # stands in for verl's TaskRunner, whose file logger reads the same variable
        def run(self, config):
            import os
            Path(os.environ["VERL_FILE_LOGGER_PATH"]).write_text("reached\\n")

    run_dir = Path(sys.argv[1])
    spec = RunSpec(framework="verl", workload=load_workload("gsm8k-grpo-tiny"), parallel=Parallelism())
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        config = compose(config_name="ppo_trainer",
                         overrides=get_adapter("verl").overrides(spec, "/nonexistent-model", run_dir))
    main_ppo.run_ppo(config, task_runner_class=Probe)
""")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_FILE_LOGGER_PATH", "RAY_ADDRESS", "RLBENCH_CPU_LANE")}
    # Ray 2.60 turns token authentication on once ~/.ray/auth_token exists; this loopback head goes without.
    return {**env, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", **extra}


def test_the_logger_path_reaches_an_actor_of_an_existing_cluster(tmp_path):
    port = free_port()
    temp = Path(tempfile.mkdtemp(prefix="rlb-ray-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--num-cpus",
            "1",
            "--num-gpus",
            "0",
            "--include-dashboard=false",
            "--temp-dir",
            str(temp),
            "--disable-usage-stats",
            *ray_free_port_args(),
        ],
        env=_clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 120
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert head.poll() is None and time.monotonic() < end, "the Ray head did not start"
            time.sleep(1)
        (tmp_path / "run").mkdir()
        driver = subprocess.run(
            [sys.executable, "-c", DRIVER, str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=300,
            env=_clean_env(RAY_ADDRESS=f"127.0.0.1:{port}"),
        )
        assert driver.returncode == 0, driver.stderr[-3000:]
        assert (tmp_path / "run" / "framework_metrics.jsonl").read_text() == "reached\n"
    finally:
        started = psutil.Process(head.pid).children(recursive=True) if head.poll() is None else []
        stop_ray_head(head, started, temp)
