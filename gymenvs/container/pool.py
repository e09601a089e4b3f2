"""A warm pool: containers started ahead of time, so that `reset` does not wait for the engine to start one.

`WarmPool.for_image` gives the process's pool for one image (and one set of limits and shell
settings, on one runtime): `size` containers, each already running its persistent shell, refilled in the
background as episodes take them. A container serves one episode only and is then removed: every
episode starts from the pristine image, and nothing passes from one episode to the next. Pool
containers carry the same owner labels as every sandbox (plus `gymenvs.container.pool`), so `close()`,
interpreter exit and the orphan reaper remove them like the others. A pool closes when the last env
using it closes.

`discard` removes a finished episode's container in the background, so the next `reset` need not
wait for the engine either.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from gymenvs.container.images import ensure_image
from gymenvs.container.runtime import Limits, Runtime, Sandbox, SandboxError
from gymenvs.container.shell import PersistentShell

LABEL_POOL = "gymenvs.container.pool"
_removers: dict[int, ThreadPoolExecutor] = {}


def discard(sandbox: Sandbox, *, wait: bool = True) -> Future | None:
    """Remove `sandbox`, now or (`wait=False`) in the background; returns the background removal."""
    return _in_background(sandbox.remove, wait=wait)


def _in_background(remove: Callable[[], None], *, wait: bool) -> Future | None:
    if wait:
        remove()
        return None
    # Per process: a child forked from a process with threads cannot use its parent's executor.
    remover = _removers.get(os.getpid()) or _removers.setdefault(
        os.getpid(), ThreadPoolExecutor(max_workers=2, thread_name_prefix="gymenvs-remove"))
    return remover.submit(remove)


def start_container(runtime: Runtime, image: str, *, episode_id: str, workdir: str, limits: Limits = Limits(),
                    setup: str = "", environment: dict[str, str] | None = None,
                    labels: dict[str, str] | None = None) -> tuple[Sandbox, PersistentShell]:
    """A started container of `image` (working in `workdir`) and its persistent shell, ready for an episode."""
    sandbox = runtime.start(image, role="agent", episode_id=episode_id, limits=limits, labels=labels, workdir=workdir)
    try:
        return sandbox, PersistentShell(sandbox, setup=setup, environment=environment)
    except BaseException:
        sandbox.remove()
        raise


class StartedAgent(Protocol):
    """An agent a pool started ahead in its container (`gymenvs.container.agent.ahead`)."""

    def alive(self) -> bool: ...

    def close(self) -> None: ...


class Warm(NamedTuple):
    """A started container from the pool, its shell (None for a pool without shells) and the agent started ahead
    in it (None unless the pool starts one), which the episode that takes it now owns."""

    sandbox: Sandbox
    shell: PersistentShell | None
    agent: StartedAgent | None = None

    def remove(self) -> None:
        if self.agent is not None:
            self.agent.close()
        if self.shell is not None:
            self.shell.close()
        self.sandbox.remove()


@dataclass(frozen=True)
class _Key:
    pid: int  # a forked child makes its own pools
    runtime: Runtime
    image: str
    limits: Limits
    setup: str
    environment: tuple[tuple[str, str], ...]
    shell: bool = True
    workdir: str = "/"
    start_agent: Callable[[Sandbox], StartedAgent] | None = None  # hashable: compared as part of the key


class WarmPool:
    """Up to `size` started containers of one image, each with its shell open (unless `shell=False`), handed
    out once each."""

    _pools: dict[_Key, WarmPool] = {}
    _pools_lock = threading.Lock()

    def __init__(self, key: _Key, size: int):
        self.key = key
        self.size = size
        self.users = 0
        self._ready: deque[Warm] = deque()
        self._starting = 0
        self._lock = threading.Lock()
        self._closed = False
        self._starter = ThreadPoolExecutor(max_workers=min(size, 4), thread_name_prefix="gymenvs-pool")

    @classmethod
    def for_image(cls, runtime: Runtime, image: str, *, size: int, workdir: str, limits: Limits = Limits(), setup: str = "",
                  environment: dict[str, str] | None = None, pull: bool = False, registry: str | None = None,
                  shell: bool = True, start_agent: Callable[[Sandbox], StartedAgent] | None = None) -> WarmPool:
        """The process's pool for `image` with these settings (made, and filled, on first use); `start_agent`:
        what starts an agent ahead in each of its containers."""
        key = _Key(os.getpid(), runtime, image, limits, setup, tuple(sorted((environment or {}).items())), shell, workdir,
                   start_agent)
        with cls._pools_lock:
            pool = cls._pools.get(key)
            if pool is None:
                ensure_image(runtime, image, pull=pull, registry=registry)
                pool = cls._pools[key] = WarmPool(key, size)
            pool.size = max(pool.size, size)
            pool._fill()
            return pool

    def take(self, *, episode_id: str) -> Warm:
        """A started container (and its shell), from the pool if one is ready (else started now)."""
        try:
            while True:
                with self._lock:
                    if not self._ready:
                        break
                    warm = self._ready.popleft()
                if _alive(warm):  # a pooled container killed from outside is replaced
                    return warm
                _in_background(warm.remove, wait=False)
            return self._start(episode_id)
        finally:
            self._fill()

    def join(self) -> None:
        """Count one more env using the pool (it closes when the last one leaves)."""
        with self._lock:
            self.users += 1

    def leave(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users <= 0
        if last:
            self.close()

    def ready(self) -> int:
        """How many started containers wait in the pool."""
        return len(self._ready)

    def close(self) -> None:
        """Remove the waiting containers, and those still starting once they are up."""
        with WarmPool._pools_lock:
            if WarmPool._pools.get(self.key) is self:
                del WarmPool._pools[self.key]
        with self._lock:
            self._closed = True
        self._starter.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            waiting, self._ready = list(self._ready), deque()
        for removal in [_in_background(warm.remove, wait=False) for warm in waiting]:
            if removal is not None:
                removal.result()

    # -- internals -------------------------------------------------------------------------

    def _fill(self) -> None:
        with self._lock:
            if self._closed:
                return
            missing = self.size - len(self._ready) - self._starting
            self._starting += max(missing, 0)
        for _ in range(missing):
            self._starter.submit(self._add)

    def _add(self) -> None:
        try:
            started = self._start("warm-pool")
        except SandboxError:
            started = None  # a reset that finds the pool empty starts its own and reports the error
        with self._lock:
            self._starting -= 1
            if started is not None and not self._closed:
                self._ready.append(started)
                return
        if started is not None:
            started.remove()

    def _start(self, episode_id: str) -> Warm:
        key = self.key
        if not key.shell:
            sandbox = key.runtime.start(key.image, role="agent", episode_id=episode_id, limits=key.limits,
                                        labels={LABEL_POOL: "1"}, workdir=key.workdir)
            if key.start_agent is None:
                return Warm(sandbox, None)
            try:
                return Warm(sandbox, None, key.start_agent(sandbox))
            except BaseException:
                sandbox.remove()
                raise
        sandbox, shell = start_container(key.runtime, key.image, episode_id=episode_id, limits=key.limits,
                                         setup=key.setup, environment=dict(key.environment), labels={LABEL_POOL: "1"},
                                         workdir=key.workdir)
        return Warm(sandbox, shell)


def _alive(warm: Warm) -> bool:
    """Whether a waiting container still runs (its shell's or its agent's stream is open; else the engine says)."""
    if warm.agent is not None:
        return warm.agent.alive()
    if warm.shell is not None:
        return warm.shell.alive()
    try:
        warm.sandbox.ensure_running()
    except SandboxError:
        return False
    return True
