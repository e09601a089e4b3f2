"""What this process reads of, and opens in, a running container from its own host's /proc, where running a program
in the container would cost the engine an exec (about 0.1 to 0.2 s) and trust the container's tools, or where a
relay through the engine would carry every byte twice.

The container's init is a process of this host; its /proc entry shows the container's network namespace. It is
used only when the entry is the container's: its cgroup path names the container's id (the engine's layout for
both cgroup drivers, Docker's and Podman's alike), so a process in another pid namespace, or of another host's
engine, reads and opens nothing and gets None.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

_LISTEN = "0A"  # the TCP state LISTEN, as /proc/net/tcp writes it


def tcp_listening(pid: int, container_id: str, *, besides: frozenset[int] = frozenset()) -> bool | None:
    """Whether a socket of the network namespace of host process `pid`, the init of container `container_id`,
    listens on TCP (IPv4 or IPv6), but the sockets whose inodes are in `besides` (this process's own, made by
    `loopback_listener`); None if this process cannot tell (not that container's process here, no permission)."""
    try:
        if not _of_container(pid, container_id):
            return None
        return any(_listening(f"/proc/{pid}/net/{table}", besides) for table in ("tcp", "tcp6"))
    except OSError:
        return None


def loopback_listener(pid: int, container_id: str) -> socket.socket | None:
    """A TCP socket of this process listening on 127.0.0.1 (a free port) in the network namespace of host process
    `pid`, the init of container `container_id`: a program in the container connects to it as to a server of its
    own, with nothing between them; None if this process cannot make one there (not that container's process here,
    no permission to enter its namespace)."""
    try:
        namespace = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not _of_container(pid, container_id):  # checked after the open: what was opened is the container's
            return None
        return _in_network_namespace(namespace, _listen_on_loopback)
    except OSError:
        return None
    finally:
        os.close(namespace)


def _of_container(pid: int, container_id: str) -> bool:
    with open(f"/proc/{pid}/cgroup") as cgroup:
        return container_id in cgroup.read()


def _listen_on_loopback() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
    except OSError:
        listener.close()
        raise
    return listener


def _in_network_namespace(namespace: int, make: Callable[[], socket.socket]) -> socket.socket | None:
    """What `make` returns, run in the network namespace `namespace` (a descriptor of it). A namespace is entered per
    thread: a thread of its own enters it and ends with `make`, so no other thread of this process changes
    namespace. A socket keeps the namespace it was made in."""
    made: list[socket.socket] = []
    failed: list[OSError] = []

    def enter_and_make() -> None:
        if _setns(namespace, _CLONE_NEWNET) != 0:  # not permitted (no CAP_SYS_ADMIN), or not a namespace
            return
        try:
            made.append(make())
        except OSError as exc:
            failed.append(exc)

    thread = threading.Thread(target=enter_and_make, name="gymenvs-enter-netns", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0] if made else None


_CLONE_NEWNET = 0x40000000


def _setns(descriptor: int, kind: int) -> int:
    """setns(2) for the calling thread: 0, or -1 (`os.setns` arrives with Python 3.12)."""
    return int(_libc().setns(descriptor, kind))


@functools.cache
def _libc() -> ctypes.CDLL:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _listening(table: str, besides: frozenset[int]) -> bool:
    try:
        with open(table) as lines:
            next(lines, None)  # the header
            return any(len(fields := line.split()) > 9 and fields[3] == _LISTEN and int(fields[9]) not in besides
                       for line in lines)
    except FileNotFoundError:  # a kernel without IPv6 has no tcp6
        return False
