"""The Ray backend: slots in Ray actors, so a vector env can spread over the nodes of a cluster.

Each actor hosts one slot by default (`max_workers` lower than the slot count makes actor `a`
host slots `a, a + A, a + 2A, ...`, which it runs concurrently on threads of its own).
A vector-env call sends one Ray task per actor with that actor's requests and waits for the
replies with `ray.wait(timeout=step_timeout_s)`. Every call gets new object refs, so a reply that
comes too late is never read: a late reply cannot reach a later step.

Failures stay with their actor: an actor that dies (killed with `ray.kill`, its worker process
killed, its node lost) or misses the deadline (then it is killed) is replaced by a fresh actor
built from the same factories, and only its own slots see an error.

An actor takes seconds to start (a Python process that imports Ray, gymenvs and the env), so
`close()` closes every env but parks the emptied actors for the next Ray vector env of this
process, if they reserve nothing (no CPUs, no custom resources: the default); actors that do
reserve resources are ended, so that they give them back. `release_idle_actors()` ends the parked
ones (Ray ends them anyway when the process exits).

Actors ask for `num_cpus=0` by default, so that many slots that mostly wait (containers, tools)
fit on a small cluster; set `num_cpus` and custom `resources` (for example `{"docker": 1}`, for
nodes started with `ray start --resources='{"docker": 8}'`) to place them. Ray is imported only
when a Ray backend starts.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
from collections.abc import Collection, Sequence
from typing import Any

import cloudpickle
import pydantic
from pydantic import Field, StrictStr

from gymenvs.env_ids import WorkerRegistrations, worker_registrations
from wrappers.vector.backends.hosts import HostedSlots, SlotHosts
from wrappers.vector.slot import EnvFactory, Request, SlotError, run_as_worker, timed_out

logger = logging.getLogger(__name__)

#: Emptied actors waiting for reuse, by their actor options; at most `MAX_IDLE_ACTORS` in all.
_IDLE: dict[str, list[Any]] = {}
MAX_IDLE_ACTORS = 256
#: How long a request waits for its actor to start before its own deadline begins.
ACTOR_START_TIMEOUT_S = 300.0
#: How long a parked actor may take to load new slots before it is taken for dead.
PARKED_ACTOR_LOAD_TIMEOUT_S = 60.0


class RaySettings(pydantic.BaseModel):
    """The Ray backend's own settings (keywords of `ConcurrentVectorEnv`)."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    #: The cluster to join (`"auto"`, `"ray://host:10001"`, ...) if Ray is not initialised yet;
    #: None starts a local Ray. Ignored when this process has already called `ray.init`.
    address: StrictStr | None = None
    #: CPUs each actor reserves (0: any number of actors fit on a node).
    num_cpus: float = Field(default=0.0, ge=0, strict=False, allow_inf_nan=False)
    #: Custom resources each actor reserves, e.g. {"docker": 1} for SWE slots.
    resources: dict[str, float] = Field(default_factory=dict, strict=False)
    #: Any other option of `ActorClass.options()` (num_gpus, memory, runtime_env, scheduling_strategy...).
    actor_options: dict[str, Any] = Field(default_factory=dict)


class SlotHost:
    """The object inside a Ray actor: the slots it hosts (see `HostedSlots`), loaded after start-up
    so that a parked actor can host other slots later."""

    def __init__(self) -> None:
        import gymenvs  # noqa: F401  registers the gymenvs ids for factories that make envs by id

        run_as_worker()
        self.hosted: HostedSlots | None = None

    def load(self, payload: bytes, restart_on_error: bool, registrations: WorkerRegistrations) -> None:
        """Host these slots, `[(slot, factory), ...]` cloudpickled (their envs are built on first use).

        The driver's own ids are registered first, and the factories unpickled after, so that a factory
        naming a user's class finds its module (Ray unpickles plain arguments before the call)."""
        registrations.install()
        self.hosted = HostedSlots(pickle.loads(payload), restart_on_error)

    def run(self, requests: list[Request]) -> list[Any]:
        assert self.hosted is not None, "load() first"
        return self.hosted.run(requests)

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this actor runs on (hex), to check where slots were placed."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        if self.hosted is not None:
            self.hosted.close()
        self.hosted = None


class _Actor:
    """The driver's handle on one actor and the slots it hosts."""

    def __init__(self, backend: RayBackend, number: int, slots: list[int]):
        self.backend = backend
        self.number = number
        self.slots = slots
        self.handle: Any = None
        #: Set while the actor starts: the ref of its `load`, which `step_timeout_s` does not cover.
        self.loading: Any = None

    def start(self) -> None:
        """Load this actor's slots into an idle actor, or into a new one."""
        import ray

        factories = cloudpickle.dumps([(index, self.backend.factories[index]) for index in self.slots])
        registrations = self.backend.registrations
        key = self.backend.actor_key
        while key is not None and (idle := _IDLE.get(key)):  # not a retry: each pass tries another parked actor
            self.handle = idle.pop()
            try:
                loading = self.handle.load.remote(factories, self.backend.restart_on_error, registrations)
                ray.get(loading, timeout=PARKED_ACTOR_LOAD_TIMEOUT_S)
                return
            except Exception:  # it died while idle
                self.kill()
        self.handle = self.backend.actor_class.remote()
        self.loading = self.handle.load.remote(factories, self.backend.restart_on_error, registrations)

    def kill(self) -> None:
        import ray

        if self.handle is not None:
            try:
                ray.kill(self.handle, no_restart=True)
            except Exception:
                logger.debug("ray actor %d: kill failed", self.number, exc_info=True)
            self.handle = self.loading = None


class RayBackend:
    Settings = RaySettings

    @classmethod
    def start(
        cls, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, settings: RaySettings
    ) -> RayBackend:
        return cls(factories, max_workers=max_workers, restart_on_error=restart_on_error, settings=settings)

    def __init__(self, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, settings: RaySettings):
        import ray

        if not ray.is_initialized():
            # Local workers find what this process imports (a test helper, a script's folder) by its sys.path.
            python_path = os.pathsep.join(path for path in sys.path if path)
            ray.init(address=settings.address, runtime_env={"env_vars": {"PYTHONPATH": python_path}})
            _IDLE.clear()  # actors of an earlier Ray session, if any, are gone
        options = {"num_cpus": settings.num_cpus, "resources": settings.resources, **settings.actor_options}
        self.actor_class = ray.remote(SlotHost).options(**options)
        #: Parked actors are reused by vector envs with the same options; None: never park these.
        reserves_nothing = not settings.num_cpus and not settings.resources and not settings.actor_options
        self.actor_key = json.dumps(options, sort_keys=True, default=repr) if reserves_nothing else None
        self.factories = list(factories)
        self.registrations = worker_registrations()
        self.restart_on_error = restart_on_error
        self._hosts = SlotHosts(len(self.factories), max_workers)
        self._actors = [_Actor(self, number, slots) for number, slots in enumerate(self._hosts.slots_of)]
        for actor in self._actors:
            actor.start()

    def actor_handles(self) -> list[Any]:
        """The running actors, one per `max_workers` (slot i is on actor i % max_workers)."""
        return [actor.handle for actor in self._actors]

    def run(self, requests: Sequence[Request], timeout_s: float | None) -> list[Any]:
        import ray

        results: list[Any] = [None] * len(requests)
        batches = {self._actors[host]: positions for host, positions in self._hosts.batches(requests, results).items()}
        self._wait_for_starting_actors(batches)
        refs = {
            actor.handle.run.remote([requests[position] for position in positions]): (actor, positions)
            for actor, positions in batches.items()
        }
        reason = f"{timed_out(timeout_s)}, so its Ray actor was killed"
        ready: list[Any] = []
        try:
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        except BaseException:  # Ctrl-C while waiting
            reason = "was interrupted, so its Ray actor was killed"
            raise
        finally:
            self._read_replies(ready, refs, requests, results)
            for ref, (actor, positions) in refs.items():
                if ref not in ready:
                    self._replace(actor, requests, positions, results, reason)
        return results

    def close(self, timeout_s: float) -> None:
        import ray

        if not ray.is_initialized():  # Ray was shut down, and our actors with it
            return
        refs = {actor.handle.close.remote(): actor for actor in self._actors if actor.handle is not None}
        closed: list[Any] = []
        try:
            closed, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        finally:
            for ref, actor in refs.items():
                if ref in closed and _park(self.actor_key, actor.handle):
                    actor.handle = None
                actor.kill()

    # -- internals -----------------------------------------------------------------------

    def _wait_for_starting_actors(self, actors: Collection[_Actor]) -> None:
        """Let new actors finish starting first: a start takes seconds, more than a step's deadline."""
        import ray

        starting = [actor.loading for actor in actors if actor.loading is not None]
        if starting:
            ray.wait(starting, num_returns=len(starting), timeout=ACTOR_START_TIMEOUT_S)
        for actor in actors:
            actor.loading = None

    def _read_replies(self, ready: list[Any], refs: dict, requests: Sequence[Request], results: list[Any]) -> None:
        import ray

        for ref in ready:
            actor, positions = refs[ref]
            try:
                replies = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                self._replace(actor, requests, positions, results, f"failed: its Ray actor died ({_first_line(exc)})")
            except Exception as exc:  # the reply could not be read (unpickling it failed, ...)
                unreadable = SlotError(f"the Ray actor's reply could not be read: {type(exc).__name__}: {_first_line(exc)}")
                for position in positions:
                    results[position] = unreadable
            else:
                for position, reply in zip(positions, replies):
                    results[position] = reply

    def _replace(self, actor: _Actor, requests: Sequence[Request], positions: list[int], results: list[Any], reason: str) -> None:
        """Start a fresh actor: its requests here fail (`reason` says how), its other slots lose their episode."""
        self._hosts.fail(actor.number, requests, positions, results, reason, "its Ray actor was replaced")
        actor.kill()
        actor.start()
        logger.warning("ray actor %d replaced: a request %s", actor.number, reason)


def _park(key: str | None, handle: Any) -> bool:
    """Keep an emptied actor for reuse, if it reserves nothing and there is room."""
    if key is None or sum(len(handles) for handles in _IDLE.values()) >= MAX_IDLE_ACTORS:
        return False
    _IDLE.setdefault(key, []).append(handle)
    return True


def release_idle_actors() -> None:
    """End the emptied actors that closed Ray vector envs left for reuse."""
    import ray

    for handles in _IDLE.values():
        for handle in handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:
                logger.debug("ray: kill of an idle actor failed", exc_info=True)
    _IDLE.clear()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
