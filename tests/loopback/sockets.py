"""The listening sockets of a process tree, and whether each is on loopback (127.0.0.0/8).

A test that starts servers checks them with these: `listeners(pid)` lists what a process and
its descendants listen on now (TCP in LISTEN, and UDP sockets bound without a peer);
`ListenerWatch` samples a tree in the background while a longer command runs, since a
framework's servers come and go during a run.

    with ListenerWatch(os.getpid()) as watch:
        run_cli("run", ...)
    assert watch.seen and not off_loopback(watch.seen)
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import dataclass, field

import psutil

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


@dataclass(frozen=True, slots=True)
class Listener:
    ip: str
    port: int
    kind: str  # "tcp" or "udp"
    pid: int
    # The process's name, e.g. gcs_server, raylet, ray::DashboardAgent; a Ray worker renames itself per task.
    process: str = field(compare=False)

    def __str__(self) -> str:
        return f"{self.kind} {self.ip}:{self.port} ({self.process}, pid {self.pid})"


def on_loopback(ip: str) -> bool:
    """The address is in 127.0.0.0/8, IPv4-mapped IPv6 (::ffff:127.0.0.1) included; :: and 0.0.0.0 are not."""
    address = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address in LOOPBACK


def off_loopback(found) -> list[Listener]:
    return sorted((listener for listener in found if not on_loopback(listener.ip)), key=str)


def tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants now; [] once it is gone."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def listeners(pid: int) -> set[Listener]:
    """What the process `pid` and its descendants listen on now."""
    processes = {process.pid: process for process in tree(pid)}
    found = set()
    # One system-wide scan, kept to the tree's PIDs: a seventh of the CPU of asking each process in turn.
    for conn in psutil.net_connections(kind="inet"):
        if conn.pid not in processes:
            continue
        tcp = conn.type == socket.SOCK_STREAM
        if (conn.status == psutil.CONN_LISTEN) if tcp else (conn.laddr and not conn.raddr):
            try:
                name = processes[conn.pid].name()
            except psutil.NoSuchProcess:
                continue  # it ended between the listing and the look
            found.add(Listener(conn.laddr.ip, conn.laddr.port, "tcp" if tcp else "udp", conn.pid, name))
    return found


class ListenerWatch:
    """Samples `listeners(pid)` every `interval_s` in a thread until the block ends; `seen` gathers them."""

    def __init__(self, pid: int, interval_s: float = 1.0) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.seen: set[Listener] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.seen |= listeners(self.pid)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> ListenerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.seen |= listeners(self.pid)
