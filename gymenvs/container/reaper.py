"""The one reaper: what gymenvs processes that are gone left behind, found by its owner labels and removed.

A process killed by SIGKILL (an OOM killer, a scheduler's hard stop) runs no cleanup. Everything it
made carries its owner (host, pid, start time: `runtime.owners`), so the next gymenvs process removes, at
its first reset, the containers, grading snapshots and grading volumes it left on the engine
(`Runtime.reap`) and the host directories it left in the temp folder (`owned_directory`); never what a
live process still uses.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from gymenvs.container.runtime import Runtime
from gymenvs.container.runtime.owners import orphaned, owner_alive, process_start_time

_DIR_PREFIX = "gymenvs-"
_lock = threading.Lock()
_reaped: dict[tuple[int, int], list[str]] = {}  # (pid, id of the runtime) -> what its one reaping removed


def reap(runtime: Runtime) -> list[str]:
    """Remove what gone processes of this host left: on `runtime`, and in the temp folder; their names."""
    return runtime.reap(orphaned) + reap_directories()


def reap_once(runtime: Runtime) -> list[str]:
    """`reap` the first time this process calls it for `runtime`; later calls return that first result."""
    key = (os.getpid(), id(runtime))
    with _lock:
        if key not in _reaped:
            _reaped[key] = reap(runtime)
        return _reaped[key]


def owned_directory(kind: str) -> Path:
    """A new, empty host directory owned by this process (named so that `reap_directories` removes it once the
    process is gone), private to this host's user."""
    pid = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{kind}-{pid}-{process_start_time(pid)}-"))


def reap_directories() -> list[str]:
    """Remove the `owned_directory` folders of gymenvs processes that are gone; their paths."""
    reaped = []
    for path in Path(tempfile.gettempdir()).glob(f"{_DIR_PREFIX}*-*-*-*"):
        parts = path.name[len(_DIR_PREFIX):].split("-")
        if len(parts) < 4 or not parts[1].isdigit() or not path.is_dir():
            continue
        if not owner_alive(int(parts[1]), parts[2] if parts[2] != "None" else ""):
            shutil.rmtree(path, ignore_errors=True)
            reaped.append(str(path))
    return reaped
