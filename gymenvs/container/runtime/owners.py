"""Who owns what a runtime creates: the labels on every container, image and volume of gymenvs, and
whether the process they name is still alive.

Every container, grading snapshot and grading volume carries `LABEL`, its `role`, and its owner's host,
pid and start time. A later process can then tell what a process that died (killed by SIGKILL, say)
left behind (`orphaned`), and never takes what a live process still uses.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from functools import cache

LABEL = "gymenvs.container"
LABEL_ROLE = "gymenvs.container.role"
LABEL_EPISODE = "gymenvs.container.episode"
LABEL_HOST = "gymenvs.container.owner.host"
LABEL_PID = "gymenvs.container.owner.pid"
LABEL_START = "gymenvs.container.owner.start"


def owner_labels() -> dict[str, str]:
    """Labels naming the current process, so a later process can tell whether it is still alive."""
    pid = os.getpid()
    return {LABEL_HOST: hostname(), LABEL_PID: str(pid), LABEL_START: process_start_time(pid) or ""}


def labels_for(role: str, **extra: str) -> dict[str, str]:
    """The labels of something this process creates in the role `role` ("agent", "grading", "snapshot"...)."""
    return {**extra, LABEL: "1", LABEL_ROLE: role, **owner_labels()}


def process_start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot, from /proc), to tell it from a later process with the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode()  # field 22 of stat(5); fields[0] here is field 3


def owner_alive(pid: int, start: str) -> bool:
    """Whether the process that labelled something still runs (a reused pid does not count)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    current = process_start_time(pid)
    return not start or current is None or current == start


def orphaned(labels: Mapping[str, str]) -> bool:
    """Whether `labels` name an owner on this host that is gone (no owner label: not ours to judge)."""
    pid = labels.get(LABEL_PID, "")
    return labels.get(LABEL_HOST) == hostname() and pid.isdigit() and not owner_alive(int(pid), labels.get(LABEL_START, ""))


@cache
def hostname() -> str:
    return socket.gethostname()
