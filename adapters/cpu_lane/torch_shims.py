"""Shims for torch.distributed (torch 2.13), shared by the verl and OpenRLHF lanes: TCPStore servers on loopback.

A lane run's Ray node is on 127.0.0.1 (`LOOPBACK_ENV`), so the frameworks give their
TCPStores a loopback host; torch's TCPStore server listens on every interface whatever
host it is given. The lane binds the server's socket to that host itself and hands it
over (`master_listen_fd`, torch's own parameter); clients connect as before.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from types import ModuleType
from typing import Any

from rlbench.adapters.cpu_lane import Shim, after_import, require

RELEASE = "torch 2.13.0"

SHIMS = (
    Shim(
        "torch/distributed/rendezvous.py: _create_c10d_store (TCPStore)",
        "torch's TCPStore server (init_process_group's env:// and tcp:// store) listens on every interface (::) "
        "whatever host it is given; on the lane its host is a loopback address, and the lane binds the server's "
        "socket there and hands it to torch (master_listen_fd)",
    ),
)


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tcp_store(host_name: str, port: int, world_size: int | None = None, is_master: bool = False, **kwargs: Any):
    """torch.distributed.TCPStore whose server, given a loopback host, listens on that host only."""
    from torch.distributed import DistNetworkError, TCPStore

    if not is_master or kwargs.get("master_listen_fd") is not None or not _loopback(host_name):
        return TCPStore(host_name, port, world_size, is_master, **kwargs)
    listener = socket.socket(socket.AF_INET6 if ":" in host_name else socket.AF_INET)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's own server socket
        listener.bind((host_name, port))
        listener.listen()
    except OSError as exc:
        listener.close()
        # The error torch raises for a taken port (code and name), so a caller's handling of it still applies.
        name = errno.errorcode.get(exc.errno or 0, "")
        raise DistNetworkError(
            f"TCPStore server socket on {host_name}:{port}: code: -{exc.errno}, name: {name}"
        ) from exc
    bound_port = listener.getsockname()[1]
    fd = listener.detach()
    try:
        return TCPStore(host_name, bound_port, world_size, is_master, master_listen_fd=fd, **kwargs)
    except Exception:
        os.close(fd)
        raise


def _store_on_loopback(rendezvous: ModuleType) -> None:
    require(rendezvous, "_create_c10d_store", RELEASE)
    require(rendezvous, "TCPStore", RELEASE)
    rendezvous.TCPStore = tcp_store  # the name _create_c10d_store builds its store with


def install() -> None:
    after_import("torch.distributed.rendezvous", _store_on_loopback)
