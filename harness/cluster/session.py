"""A run's side of a Ray cluster: join it, check the layout fits, place one agent per node, stage the
run's inputs on every node, sample every node while the framework runs, and bring back what it left there.

A run calls, in order: `join_for_run` (before launch; refuses a layout the cluster cannot hold), `stage_run`
and `start_sampling`, `poll` while the framework runs (agents' rows go to a journal beside the telemetry, so a
crash keeps them), then `finish_run` (outputs back, rows into telemetry.parquet, the cluster left). The
session's fields are written by its own methods only; what the record says of the cluster is `describe`'s and
`finish_run`'s.
No shared filesystem is assumed: an agent writes a staged file only where its content differs, and brings
back only files the driver's run folder lacks, so on one machine or a shared filesystem nothing moves.

    session = ClusterSession.open("10.0.0.1:6379", nodes=2, gpus_each=8, layout="nodes=2 dp=16")
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from rlbench.adapters.base import Adapter
from rlbench.harness.cluster.node_agent import WATCHED_PACKAGES, NodeAgent
from rlbench.harness.cluster.ray_cluster import ClusterNode, check_fits, cluster_nodes, connect
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.environment import package_version
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import knob_label
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry.store import add_rows

DRAIN_EVERY_S = 5.0  # how much of a node's telemetry a crash of rlbench can lose
CALL_TIMEOUT_S = 120.0  # one agent call; a node that does not answer in this time is reported, not waited on
NODE_JOURNAL = "telemetry.nodes.partial.jsonl"
NODE_MARKER, DRIVER_MARKER = ".rlbench-node", ".rlbench-driver"
STAGE_LIMIT_BYTES = 2 * 2**30  # a model folder larger than this is not copied: it must already be on every node


def join_for_run(spec: RunSpec, adapter: Adapter) -> ClusterSession | None:
    """The Ray cluster of `--ray-address`, checked against the layout before anything is recorded; None where the
    run needs none (or its framework runs on this host: a Ray job's cell); a multi-node layout without one is
    refused."""
    p = spec.parallel
    if not spec.ray_address:
        if p.nodes > 1:
            raise RLBenchError(
                f"--parallel nodes={p.nodes}: a multi-node run joins a running Ray cluster; give --ray-address "
                "HOST:PORT of its head (or set RAY_ADDRESS), or use nodes=1"
            )
        return None
    if not adapter.brings_own_ray:  # it runs on this host (its nodes knob is refused): a Ray job's cell, say
        return None
    layout = knob_label(p.non_default())
    return ClusterSession.open(
        spec.ray_address, nodes=p.nodes, gpus_each=p.gpus_on_each_node(adapter.job_gpus(spec)), layout=layout
    )


class ClusterSession:
    def __init__(self, address: str, ray: Any, nodes: list[ClusterNode], agents: dict[str, Any]) -> None:
        self.address, self.ray, self.nodes, self.agents = address, ray, nodes, agents
        self.described: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.staged: dict[str, int] = {}  # label -> files written there (0 on a node sharing the driver's files)
        self._drained_at = time.monotonic()
        self._journal: Path | None = None

    @classmethod
    def open(cls, address: str, *, nodes: int, gpus_each: int, layout: str) -> ClusterSession:
        """Join the cluster at `address`, refuse a layout it cannot hold, place an agent on every live node."""
        ray = connect(address)
        found = cluster_nodes()
        try:
            check_fits(found, nodes, gpus_each, layout)
        except RLBenchError:
            ray.shutdown()
            raise
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(NodeAgent)
        agents = {
            node.label: remote.options(
                num_cpus=0,  # it takes no slot a framework's actor would be placed in
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            ).remote(node.label)
            for node in found
        }
        session = cls(address, ray, found, agents)
        session.described = session._call_all("describe")
        return session

    def _call_all(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """`method` on every agent; a node that fails or does not answer is noted and left out."""
        pending = {label: getattr(agent, method).remote(*args, **kwargs) for label, agent in self.agents.items()}
        answers = {}
        for label, ref in pending.items():
            try:
                answers[label] = self.ray.get(ref, timeout=CALL_TIMEOUT_S)
            except Exception as exc:  # a dead node, a timeout, an agent that cannot import rlbench
                note = f"{label}: {method} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if note not in self.notes:
                    self.notes.append(note)
        return answers

    def describe(self, placement: str | None) -> dict[str, Any]:
        """run.json's `cluster`: the address, Ray's version, every node (resources, host, GPUs, driver, package
        versions), the framework's placement, and the nodes whose software differs from the driver's."""
        driver = {name: package_version(name) for name in WATCHED_PACKAGES if package_version(name)}
        nodes, differences = [], []
        for node in self.nodes:
            info = self.described.get(node.label, {})
            nodes.append({**node.to_dict(), **{k: v for k, v in info.items() if k != "label"}})
            packages = info.get("packages")
            if packages is None:
                continue
            for name in sorted(set(driver) | set(packages)):
                if driver.get(name) != packages.get(name):
                    differences.append(
                        f"{node.label} ({info.get('hostname')}): {name} {packages.get(name) or 'absent'}, "
                        f"driver {driver.get(name) or 'absent'}"
                    )
        machines = {n.get("machine") for n in nodes if n.get("machine")}
        return {
            "address": self.address,
            "ray_version": driver.get("ray"),
            "nodes": nodes,
            "machines": len(machines),
            "placement": placement,
            "differences": differences,
            "notes": self.notes,
        }

    def stage(self, run_dir: Path, inputs: list[Path]) -> dict[str, list[str]]:
        """Make the run folder on every node and copy `inputs` (files, or folders up to STAGE_LIMIT_BYTES) to the
        same absolute paths where a node's copy differs; label -> paths written there."""
        files: dict[str, bytes] = {}
        for path in inputs:
            members = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            size = sum(p.stat().st_size for p in members if p.exists())
            if size > STAGE_LIMIT_BYTES:
                self.notes.append(
                    f"{path} ({size / 1e9:.1f} GB) is not staged: it must already be on every node "
                    "(a shared filesystem, or the same model cache)"
                )
                continue
            files.update({str(p.absolute()): p.read_bytes() for p in members if p.is_file()})
        # The run folder on every node (a node's framework processes write their logs there), and a marker only
        # the driver's copy holds: an agent that sees it shares the driver's files and brings nothing back.
        files[str((run_dir / NODE_MARKER).absolute())] = b""
        (run_dir / DRIVER_MARKER).write_text(secrets.token_hex(8))
        written = self._call_all("stage", files)
        return {label: [path for path in paths if not path.endswith(NODE_MARKER)] for label, paths in written.items()}

    def stage_run(self, adapter: Adapter, spec: RunSpec, inputs: RunInputs, run_dir: Path) -> None:
        """The run's inputs onto every node; a file that cannot be read is noted, and the framework then fails
        where a node lacks it (its own error in framework.log)."""
        try:
            written = self.stage(run_dir, adapter.node_inputs(spec, inputs, run_dir))
        except OSError as exc:
            self.notes.append(f"staging the run's inputs: {exc.strerror or exc}")
            return
        self.staged = {label: len(paths) for label, paths in written.items()}

    def finish_run(self, run_dir: Path, telemetry: Path, stop_driver_sampler: Any = None) -> dict[str, Any]:
        """What the framework left on other nodes comes back, every node's telemetry joins `telemetry` (after the
        driver's own rows: `stop_driver_sampler` first), and the run leaves the cluster; run.json's `cluster`
        fields of the run's end. A node that fails here is noted, never fatal to the record."""
        brought: dict[str, list[str]] = {}
        rows = 0
        try:
            brought = self.collect(run_dir)
            if stop_driver_sampler is not None:
                stop_driver_sampler()
            rows = self.finish(telemetry)
        except (OSError, ValueError, RLBenchError) as exc:
            self.notes.append(f"finishing on the cluster: {type(exc).__name__}: {exc}")
        finally:
            self.close()
        return {"staged": self.staged, "collected": brought, "node_rows": rows, "notes": self.notes}

    def start_sampling(self, run_dir: Path, rate_hz: float) -> None:
        """Every node's agent samples its host and the framework's processes; GPUs only by the first agent on
        each machine (two Ray nodes on one machine would count its GPUs twice)."""
        self._journal = run_dir / NODE_JOURNAL
        seen: set[str] = set()
        for node in self.nodes:
            machine = self.described.get(node.label, {}).get("machine") or node.label
            first = machine not in seen
            seen.add(machine)
            if node.label in self.agents:
                self.agents[node.label].start_sampling.remote(rate_hz, first)

    def poll(self) -> None:
        """Drain the agents' rows into the journal every DRAIN_EVERY_S (called from the runner's poll)."""
        if self._journal is None or time.monotonic() - self._drained_at < DRAIN_EVERY_S:
            return
        self._drained_at = time.monotonic()
        rows = [row for answer in self._call_all("drain").values() for row in answer]
        if rows:
            with self._journal.open("a", encoding="utf-8") as journal:
                journal.writelines(json.dumps(row) + "\n" for row in rows)

    def collect(self, run_dir: Path) -> dict[str, list[str]]:
        """Bring back the files the nodes wrote under the run folder that this one lacks; label -> names."""
        known = {str(p.relative_to(run_dir)): p.stat().st_size for p in run_dir.rglob("*") if p.is_file()}
        token = (run_dir / DRIVER_MARKER).read_text() if (run_dir / DRIVER_MARKER).exists() else ""
        brought: dict[str, list[str]] = {}
        for label, files in self._call_all("collect", str(run_dir.absolute()), known, token).items():
            for name, content in files.items():
                target = run_dir / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                brought.setdefault(label, []).append(name)
        return brought

    def finish(self, telemetry: Path) -> int:
        """Stop sampling and add every node's rows (journal and tail) to `telemetry`; the rows added."""
        rows = [row for answer in self._call_all("stop_sampling").values() for row in answer]
        if self._journal is not None and self._journal.exists():
            journaled = []
            for line in self._journal.read_text(encoding="utf-8").splitlines():
                try:
                    journaled.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
            rows = journaled + rows
        if rows:
            add_rows(telemetry, rows)
        if self._journal is not None:
            self._journal.unlink(missing_ok=True)
        return len(rows)

    def close(self) -> None:
        for agent in self.agents.values():
            try:
                self.ray.kill(agent)
            except Exception:  # already gone with its node
                pass
        self.ray.shutdown()
