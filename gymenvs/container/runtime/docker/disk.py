"""Looks at the size of containers' writable layers in the background, for sandboxes whose disk limit the engine
cannot cap itself (`DockerSandbox.check_disk`).

The engine computes a layer's size on request, and Podman's service answers such requests slowly when many come at
once: with 64 SWE-v0 episodes each asking at its first command, answers took up to 1.8 s, and every one of those
commands waited (`examples/benchmarks/scale.py`, docs/scale.md). One thread per runtime asks instead, one container
at a time; a step only reads the last verdict. A thread idle for `IDLE_EXIT_S` ends (the next request starts
another), and it is a daemon: a program that forgets `close()` still exits.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

IDLE_EXIT_S = 10.0


class DiskWatch:
    """Runs each requested look (a callable measuring one container's layer) in a thread of its own, in order."""

    def __init__(self, name: str):
        self._name = name
        self._looks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def request(self, look: Callable[[], None]) -> None:
        self._looks.put(look)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"gymenvs-disk-watch-{self._name}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                look = self._looks.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:  # a request racing the exit sees the thread alive or starts another
                    if self._looks.empty():
                        self._thread = None
                        return
                continue
            look()
