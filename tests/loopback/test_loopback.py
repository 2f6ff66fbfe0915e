"""Servers the tests start listen on loopback only (127.0.0.0/8).

The Ray cluster the Ray tests use (tests/loopback/ray_cluster.py) is started as they start
it, with a job running on it so that its workers and a job's driver listen too; every
listening socket of every process of the cluster (the helper's process tree, by PID) must
be on 127.0.0.0/8. A CPU lane's framework starts its own Ray with ray.init(): in the lane's
environment (rlbench.adapters.cpu_lane.lane_env) it listens on loopback only too. The check
itself is shown to flag a socket on all interfaces (on data: no test opens one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import PROJECT_ROOT
from tests.loopback.sockets import Listener, listeners, off_loopback, on_loopback, tree


def test_the_check_tells_loopback_from_the_rest():
    assert on_loopback("127.0.0.1") and on_loopback("127.8.9.10") and on_loopback("::ffff:127.0.0.1")
    assert not any(map(on_loopback, ("0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2", "::1")))
    found = {Listener("::", 6379, "tcp", 1, "gcs_server"), Listener("::ffff:127.0.0.1", 6380, "tcp", 2, "raylet")}
    assert [str(s) for s in off_loopback(found)] == ["tcp :::6379 (gcs_server, pid 1)"]


def test_listeners_are_found_by_the_pid_of_a_process_tree():
    # A listener in a grandchild: bash starts python. Bound to loopback, as every socket a test opens.
    code = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print(1); time.sleep(60)"
    child = subprocess.Popen(["bash", "-c", f'{sys.executable} -u -c "{code}"; :'], stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        (found,) = listeners(child.pid)
    finally:
        for process in reversed(tree(child.pid)):
            process.kill()
        child.wait(timeout=10)
    assert found.ip == "127.0.0.1" and found.kind == "tcp" and found.pid != child.pid


# A job whose driver joins the cluster and runs a task: a worker and the job's driver are up while it sleeps.
JOB = (
    'python -c "import ray, time; ray.init(); ray.get(ray.remote(lambda: 0).remote()); '
    "print('ready', flush=True); time.sleep(120)\""
)


@pytest.mark.slow
def test_every_socket_of_the_ray_tests_cluster_is_on_loopback(monkeypatch):
    job_submission = pytest.importorskip("ray.job_submission")
    from tests.loopback.ray_cluster import CLIENT_ENV, loopback_ray

    with loopback_ray(dashboard=True) as ray:  # as tests/sweep/test_sweep_ray.py starts it
        for name, value in CLIENT_ENV.items():  # this process's client; the cluster started without them
            monkeypatch.setenv(name, value)
        client = job_submission.JobSubmissionClient(ray.dashboard_url)
        job = client.submit_job(entrypoint=JOB)
        end = time.monotonic() + 120
        while "ready" not in client.get_job_logs(job):
            status = client.get_job_status(job)
            assert not status.is_terminal() and time.monotonic() < end, client.get_job_logs(job)[-2000:]
            time.sleep(1)
        found = listeners(ray.pid) | ray.watch.seen
        client.stop_job(job)
    processes = {listener.process for listener in found}
    assert {"gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= processes, processes
    assert any(listener.process.startswith("ray::") and "Agent" not in listener.process for listener in found), (
        f"no worker of the job listened: {processes}"
    )
    stray = off_loopback(found)
    assert not stray, "listening off loopback:\n" + "\n".join(map(str, stray))


# A CPU lane's framework calls ray.init() with no address, as this does, in a process with the lane's environment.
LANE_DRIVER = """
import os, ray
from tests.loopback.sockets import listeners
ray.init(num_cpus=1, num_gpus=0)
print(ray.get(ray.remote(lambda: ray.util.get_node_ip_address()).remote()))
print("\\n".join(f"{s.kind} {s.ip} {s.port} {s.process}" for s in listeners(os.getpid())), flush=True)
ray.shutdown()
"""


@pytest.mark.slow
def test_a_cpu_lane_frameworks_own_ray_listens_on_loopback():
    pytest.importorskip("ray")
    from rlbench.adapters import cpu_lane, registry

    for framework in registry.lanes():  # every lane's processes get the same settings
        assert cpu_lane.LOOPBACK_ENV.items() <= cpu_lane.lane_env(framework).items()
    env = {**os.environ, **cpu_lane.lane_env("verl"), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", LANE_DRIVER], capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    node_ip, *found = done.stdout.splitlines()
    assert node_ip == "127.0.0.1"
    assert {"gcs_server", "raylet"} <= {line.split()[3] for line in found}, found
    stray = [line for line in found if not on_loopback(line.split()[1])]
    assert not stray, "listening off loopback:\n" + "\n".join(stray)


# verl's and OpenRLHF's workers join their process group through env://: rank 0 serves torch's TCPStore.
LANE_GROUP = """
import os, torch.distributed as dist
from tests.loopback.sockets import listeners
dist.init_process_group("gloo", rank=0, world_size=1)
print("\\n".join(f"{s.kind} {s.ip} {s.port}" for s in listeners(os.getpid())), flush=True)
dist.destroy_process_group()
"""


def test_a_cpu_lane_process_groups_store_listens_on_loopback():
    pytest.importorskip("torch.distributed")
    from rlbench.adapters import cpu_lane
    from tests.loopback.ray_cluster import free_port

    port = free_port()
    env = {**os.environ, **cpu_lane.lane_env("verl"), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    done = subprocess.run(
        [sys.executable, "-c", LANE_GROUP], capture_output=True, text=True, env=env, cwd=PROJECT_ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = done.stdout.splitlines()
    assert f"tcp 127.0.0.1 {port}" in found, found  # the store, on its host only (torch alone listens on ::)
    assert all(on_loopback(line.split()[1]) for line in found), found
