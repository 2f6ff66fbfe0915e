"""A Ray cluster for tests that listens on loopback only: `ray.cluster_utils.Cluster` in one helper process.

`ray start --head --node-ip-address 127.0.0.1` does not stay on loopback: `ray start` (like
`ray.init(_node_ip_address=...)` and a client's RAY_ADDRESS) passes the address through
`ray._private.services.resolve_ip_for_localhost`, which swaps 127.0.0.1 for
`get_node_ip_address()`, the address this machine reaches the internet from, and Ray's
servers for a node on that address listen on every interface. `Cluster.add_node` hands
`node_ip_address` to `ray._private.node.Node` as given, and with 127.0.0.1 every component
listens on 127.0.0.1 (tests/loopback/test_loopback.py checks it). A driver given
"127.0.0.1:<port>" resolves it the same way unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
under which `get_node_ip_address()` answers 127.0.0.1 (on Linux it does nothing else but
refuse `ray start --address`, which this cluster does not use): the helper sets it for every
process of the cluster (workers and job drivers take the raylet's environment), and
`LoopbackRay.client_env()` for a driver started outside it.

    with loopback_ray(dashboard=True) as ray:  # ray.gcs_address, ray.dashboard_url, ray.pid
        JobSubmissionClient(ray.dashboard_url).submit_job(...)

Run as a module it is the helper: `python -m tests.loopback.ray_cluster '<json spec>' <temp folder>`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.loopback.sockets import ListenerWatch, off_loopback

LOOPBACK = "127.0.0.1"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
READY_FILE = "ready.json"
# RayParams ports a node otherwise takes at a fixed default (52365, ...) or that collide with another Ray here.
NODE_PORTS = (
    "object_manager_port",
    "dashboard_agent_listen_port",
    "metrics_agent_port",
    "metrics_export_port",
    "runtime_env_agent_port",
)
# Ports read from the environment at a fixed default: the autoscaler's and the dashboard's metrics.
ENV_PORTS = ("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT")
CLIENT_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # "127.0.0.1" stays 127.0.0.1 (see the module docstring)
    # Ray 2.60 turns token authentication on once ~/.ray/auth_token exists (any local ray.init writes one,
    # e.g. a verl or OpenRLHF run); this loopback cluster and its clients go without it.
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True, slots=True)
class LoopbackRay:
    gcs_address: str  # 127.0.0.1:<port>, for RAY_ADDRESS
    dashboard_url: str | None  # http://127.0.0.1:<port>, the job API; None without the dashboard
    pid: int  # the helper process: every process of the cluster descends from it
    temp: Path
    watch: ListenerWatch  # what the cluster's processes have listened on so far

    def client_env(self) -> dict[str, str]:
        """What a driver outside the cluster needs to reach it on loopback."""
        return {**CLIENT_ENV, "RAY_ADDRESS": self.gcs_address}


def _node_args(spec: dict, head: bool) -> dict:
    args = {
        "node_ip_address": LOOPBACK,
        "num_cpus": spec["num_cpus"],
        "num_gpus": spec.get("num_gpus", 0),  # logical GPUs: what a CPU lane's frameworks place workers by
        **{name: free_port() for name in NODE_PORTS},
    }
    if head:
        args.update(gcs_server_port=free_port(), node_manager_port=free_port(), dashboard_host=LOOPBACK)
        args.update(include_dashboard=spec["dashboard"], dashboard_port=free_port() if spec["dashboard"] else None)
    return args


def serve(spec: dict, temp: Path) -> None:
    """The helper: start the nodes, write READY_FILE, hold them until SIGTERM or the parent's exit."""
    from ray.cluster_utils import Cluster

    parent = os.getppid()
    cluster = Cluster(initialize_head=True, head_node_args=_node_args(spec, head=True), shutdown_at_exit=True)
    try:
        for _ in range(spec["nodes"] - 1):
            cluster.add_node(**_node_args(spec, head=False))
        cluster.wait_for_nodes(timeout=60)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())  # after the nodes: Ray's Node installs its own
        dashboard = f"http://{cluster.webui_url}" if spec["dashboard"] else None
        ready = {"gcs_address": cluster.address, "dashboard_url": dashboard}
        (temp / "ready.tmp").write_text(json.dumps(ready))
        (temp / "ready.tmp").replace(temp / READY_FILE)
        while not stop.wait(1) and os.getppid() == parent:
            pass
    finally:
        cluster.shutdown()
    if os.getppid() != parent:  # the test process died without stopping it: nobody else will clean up
        shutil.rmtree(temp, ignore_errors=True)


def _wait_ready(helper: subprocess.Popen, temp: Path, timeout_s: float) -> dict:
    end = time.monotonic() + timeout_s
    while not (temp / READY_FILE).exists():
        if helper.poll() is not None or time.monotonic() > end:
            log = (temp / "helper.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the loopback Ray cluster did not start (helper exit {helper.poll()}):\n{log}")
        time.sleep(0.5)
    ready = json.loads((temp / READY_FILE).read_text())
    while ready["dashboard_url"]:  # the job API answers a little after the node registers
        try:
            urllib.request.urlopen(f"{ready['dashboard_url']}/api/version", timeout=2)
            break
        except OSError:
            if helper.poll() is not None or time.monotonic() > end:
                raise RuntimeError("the loopback Ray cluster's dashboard did not answer") from None
            time.sleep(1)
    return ready


def stop(helper: subprocess.Popen, timeout_s: float = 60) -> None:
    """SIGTERM the helper (it shuts its cluster down), then kill by PID whatever of its tree is left."""
    import psutil

    try:
        started = psutil.Process(helper.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    helper.send_signal(signal.SIGTERM)
    try:
        helper.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait(timeout=10)
    for process in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(started, timeout=10)


def _start(
    spec: dict, temp: Path, timeout_s: float, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, dict]:
    """The helper process and its READY_FILE. Ray's own start-up deadline can pass on a loaded machine (the
    node "timed out during startup"): a helper that exits before it is ready gets one more try."""
    env = {
        **os.environ,
        **(extra_env or {}),
        **CLIENT_ENV,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RAY_TMPDIR": str(temp),
        **{name: str(free_port()) for name in ENV_PORTS},
    }
    env.pop("RAY_ADDRESS", None)
    for attempt in (1, 2):
        with open(temp / "helper.log", "w") as log:
            helper = subprocess.Popen(
                [sys.executable, "-m", __name__, json.dumps(spec), str(temp)],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            return helper, _wait_ready(helper, temp, timeout_s)
        except RuntimeError:
            gave_up = helper.poll() is not None  # Ray's deadline, not ours: ours is not tried again
            stop(helper)
            if attempt == 2 or not gave_up:
                raise
    raise AssertionError("not reached")


@contextlib.contextmanager
def loopback_ray(
    *,
    nodes: int = 1,
    num_cpus: int = 2,
    num_gpus: int = 0,
    dashboard: bool = False,
    env: dict[str, str] | None = None,
    timeout_s: float = 120,
) -> Iterator[LoopbackRay]:
    """A Ray cluster of `nodes` nodes on 127.0.0.1, stopped by its PIDs when the block ends (also on failure).

    Its listening sockets are sampled while the block runs (`LoopbackRay.watch`); one off loopback fails
    the block's end.

    Its processes run with this interpreter's folder first on PATH (a job's `python` is this one) and
    CLIENT_ENV (and `env`: every worker of the cluster inherits it); each node declares `num_gpus` logical
    GPUs; every Ray port is a free one, and its temp folder is a short one of its own (Ray's socket
    paths have a length limit) that also takes Ray's `ray_current_cluster` file (RAY_TMPDIR).
    """
    temp = Path(tempfile.mkdtemp(prefix="rlb-ray-", dir="/tmp"))
    try:
        spec = {"nodes": nodes, "num_cpus": num_cpus, "num_gpus": num_gpus, "dashboard": dashboard}
        helper, ready = _start(spec, temp, timeout_s, env)
        try:
            with ListenerWatch(helper.pid, interval_s=2) as watch:
                yield LoopbackRay(ready["gcs_address"], ready["dashboard_url"], helper.pid, temp, watch)
            stray = off_loopback(watch.seen)  # reached when the block succeeded: then the cluster must have too
            assert not stray, "the loopback Ray cluster listened off loopback:\n" + "\n".join(map(str, stray))
        finally:
            stop(helper)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]), Path(sys.argv[2]))
