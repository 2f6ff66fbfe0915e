"""A gloo checkpoint engine for verl's CPU lane: the trainer's weights to a rollout pool of its own.

verl moves weights from the trainer to a separate rollout pool through a checkpoint engine (NCCL, NIXL, ...,
all GPU transports). verl loads third-party engines by name (rollout.checkpoint_engine.custom_backend_module);
this module registers "gloo" there, so the lane's disaggregated and asynchronous trainers run verl's own
weight-sync protocol (prepare, build_topology, init_process_group, send/receive, finalize) over a gloo group.

The group is one sender (the trainer's rank 0, which gathers the full weights) and every rollout worker; it is
a process group of its own (a TCPStore and ProcessGroupGloo), beside the default group each process already
has. Buckets go as a pickled header (names, shapes, offsets) and the bucket's bytes, both broadcast by rank 0.
The last header carries the sum of every byte sent; each receiver checks its own sum against it and prints
one line per sync (`SYNC_LINE`), so a record's log shows that each sync delivered the trainer's weights.
"""

from __future__ import annotations

import pickle
import socket
from dataclasses import dataclass
from datetime import timedelta

import ray
import torch
import torch.distributed as dist
from verl.checkpoint_engine.base import (
    CheckpointEngine,
    CheckpointEngineRegistry,
    merge_weight_chunks,
    split_weight_chunks,
)

from rlbench.adapters.cpu_lane.torch_shims import tcp_store

BACKEND = "gloo"
# The rank makes each worker's line its own: Ray folds identical lines of different workers into one.
SYNC_LINE = (
    "rlbench gloo checkpoint engine: sync {sync} rank {rank} {side} {tensors} tensors, {bytes} bytes, byte sum {total}"
)
TIMEOUT = timedelta(minutes=30)  # a sync waits for the rollout side to finish its batch


@dataclass
class Rendezvous:
    """Where the sender's store listens, and which sync this is (each sync builds a fresh group)."""

    host: str
    port: int
    sync: int


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@CheckpointEngineRegistry.register(BACKEND)
class GlooCheckpointEngine(CheckpointEngine):
    """verl's CheckpointEngine over gloo: rank 0 (trainer) broadcasts buckets to every rollout worker."""

    def __init__(self, bucket_size: int, is_master: bool = False, **_: object) -> None:
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.rank = -1
        self.group = None
        self.store = None
        self.syncs = 0
        self.sync = 0

    def prepare(self) -> Rendezvous | None:
        if not self.is_master:
            return None
        if self.store is None:  # the sender hosts the store for the whole run
            host = ray.util.get_node_ip_address().strip("[]")
            port = _free_port(host)
            # The lane's store helper: on a loopback host its server listens there only, as every lane server does.
            self.store = tcp_store(host, port, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
            self.address = (host, self.store.port)
        self.syncs += 1
        return Rendezvous(*self.address, self.syncs)

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list):
        rendezvous = metadata[0]
        world = 1 + rollout_world_size
        actor = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),  # only the trainer's rank 0 sends
            "world_size": [world] * actor_wg_world_size,
            "rendezvous": [rendezvous] * actor_wg_world_size,
        }
        rollout = {
            "rank": list(range(1, world)),
            "world_size": [world] * rollout_world_size,
            "rendezvous": [rendezvous] * rollout_world_size,
        }
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, rendezvous: Rendezvous) -> None:
        self.rank, self.sync = rank, rendezvous.sync
        if rank < 0:
            return
        store = self.store or dist.TCPStore(rendezvous.host, rendezvous.port, is_master=False, timeout=TIMEOUT)
        prefixed = dist.PrefixStore(f"rlbench-sync-{rendezvous.sync}", store)
        self.group = dist.ProcessGroupGloo(prefixed, rank, world_size, TIMEOUT)

    def finalize(self) -> None:
        self.group = None

    def _broadcast(self, tensor: torch.Tensor) -> None:
        options = dist.BroadcastOptions()
        options.rootRank = 0
        self.group.broadcast([tensor], options).wait()

    def _broadcast_header(self, header: dict | None) -> dict:
        size = torch.zeros(1, dtype=torch.int64)
        payload = pickle.dumps(header) if self.rank == 0 else b""
        size[0] = len(payload)
        self._broadcast(size)
        buffer = (
            torch.frombuffer(bytearray(payload), dtype=torch.uint8)
            if self.rank == 0
            else torch.empty(int(size[0]), dtype=torch.uint8)
        )
        self._broadcast(buffer)
        return header if self.rank == 0 else pickle.loads(buffer.numpy().tobytes())

    @torch.no_grad()
    async def send_weights(self, weights, global_steps: int | None = None):
        if self.rank < 0:  # producing each weight is collective over the trainer's ranks: walk it anyway
            for _ in weights:
                pass
            return {}
        bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
        metas, offset, self.sent = [], 0, [0, 0, 0]  # tensors, bytes, byte sum
        async for meta, chunk in split_weight_chunks(weights, self.bucket_size):
            if offset + meta.chunk_size > self.bucket_size:
                self._send_bucket(bucket, metas, offset, last=False)
                metas, offset = [], 0
            meta.offset = offset
            bucket[offset : offset + meta.chunk_size] = chunk.cpu()
            metas.append(meta)
            offset += meta.chunk_size
        self._send_bucket(bucket, metas, offset, last=True)
        print(
            SYNC_LINE.format(
                sync=self.sync,
                rank=self.rank,
                side="sent",
                tensors=self.sent[0],
                bytes=self.sent[1],
                total=self.sent[2],
            )
        )
        return {}

    def _send_bucket(self, bucket: torch.Tensor, metas: list, length: int, last: bool) -> None:
        payload = bucket[:length]
        self.sent = [
            self.sent[0] + len(metas),
            self.sent[1] + length,
            self.sent[2] + int(payload.sum(dtype=torch.int64)),
        ]
        self._broadcast_header({"metas": metas, "length": length, "last": last, "byte_sum": self.sent[2]})
        self._broadcast(payload)

    @torch.no_grad()
    async def receive_weights(self, global_steps: int | None = None):
        async for name, weight in merge_weight_chunks(self._receive_chunks(), self.bucket_size):
            yield name, weight

    async def _receive_chunks(self):
        tensors, size, total = 0, 0, 0
        while True:
            header = self._broadcast_header(None)
            bucket = torch.empty(header["length"], dtype=torch.uint8)
            self._broadcast(bucket)
            tensors, size, total = (
                tensors + len(header["metas"]),
                size + len(bucket),
                total + int(bucket.sum(dtype=torch.int64)),
            )
            for meta in header["metas"]:
                yield meta, bucket[meta.offset : meta.offset + meta.chunk_size]
            if header["last"]:
                break
        print(
            SYNC_LINE.format(sync=self.sync, rank=self.rank, side="received", tensors=tensors, bytes=size, total=total)
        )
        if total != header["byte_sum"]:
            raise RuntimeError(f"gloo weight sync {self.sync}: received byte sum {total}, sent {header['byte_sum']}")
