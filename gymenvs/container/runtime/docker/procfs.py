"""What this process reads of a running container from its own host's /proc, where running a program in the
container would cost the engine an exec (about 0.1 to 0.2 s) and trust the container's tools.

The container's init is a process of this host; its /proc entry shows the container's network namespace. It is
read only when the entry is the container's: its cgroup path names the container's id (the engine's layout for
both cgroup drivers, Docker's and Podman's alike), so a process in another pid namespace, or of another host's
engine, reads nothing and gets None.
"""

from __future__ import annotations

_LISTEN = "0A"  # the TCP state LISTEN, as /proc/net/tcp writes it


def tcp_listening(pid: int, container_id: str) -> bool | None:
    """Whether a socket of the network namespace of host process `pid`, the init of container `container_id`,
    listens on TCP (IPv4 or IPv6); None if this process cannot tell (not that container's process here, no
    permission)."""
    try:
        with open(f"/proc/{pid}/cgroup") as cgroup:
            if container_id not in cgroup.read():
                return None
        return any(_listening(f"/proc/{pid}/net/{table}") for table in ("tcp", "tcp6"))
    except OSError:
        return None


def _listening(table: str) -> bool:
    try:
        with open(table) as lines:
            next(lines, None)  # the header
            return any(len(fields := line.split()) > 3 and fields[3] == _LISTEN for line in lines)
    except FileNotFoundError:  # a kernel without IPv6 has no tcp6
        return False
