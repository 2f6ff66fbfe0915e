"""verl's metrics destination reaches its Ray actors on an existing Ray cluster (issue 17, rule 5).

A Ray cluster is started on loopback by this module (tests/loopback/ray_cluster.py),
from an environment without VERL_FILE_LOGGER_PATH; a driver process (also without it)
runs verl's own `run_ppo` with RAY_ADDRESS pointing at that cluster and the overrides the
adapter generates. The task runner is a probe actor that writes to the path it finds in
its environment: the file appears only if the destination travelled in the job's
runtime_env.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.loopback.ray_cluster import loopback_ray

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
    from rlbench.harness.spec.parallel import Parallelism
    from rlbench.harness.spec.runspec import RunSpec
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


def test_the_logger_path_reaches_an_actor_of_an_existing_cluster(tmp_path, monkeypatch):
    for name in ("VERL_FILE_LOGGER_PATH", "RAY_ADDRESS", "RLBENCH_CPU_LANE"):  # neither cluster nor driver has them
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "run").mkdir()
    with loopback_ray(num_cpus=1) as ray:
        driver = subprocess.run(
            [sys.executable, "-c", DRIVER, str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **ray.client_env()},
        )
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert (tmp_path / "run" / "framework_metrics.jsonl").read_text() == "reached\n"
