"""The process backend: slots in worker processes, for CPU-bound envs.

Each worker process hosts one slot by default (`max_workers` lower than the slot count makes
worker `w` host slots `w, w + W, w + 2W, ...`, which it runs on threads of its own, as the
thread backend does: steps that compute run one after another, steps that wait overlap).
Parent and worker talk over a pipe: a message is `(request_id, [(slot, command, argument), ...])` and the reply is
`(request_id, [result, ...])`. Observations travel pickled through the pipe, never through
gymnasium's shared memory (which hands back stale placeholders for `Text` observations).

Failures stay inside their worker:

- a worker that dies (`os._exit`, a signal, the OOM killer) is noticed by the end of its pipe;
- a worker that misses the deadline is killed;
- either way it is started again with fresh envs from the same factories, and only its own
  slots see an error (a Ctrl-C while waiting kills and restarts the workers not done yet).

So a late reply has no pipe left to arrive on; still, each reply carries its request's id, and
one that is not for the current request is dropped, never handed to a later call.

Factories are pickled with cloudpickle (lambdas and closures work) and each worker imports
gymenvs and registers every other id the parent has registered (a user's env, from the folder its
module was imported from: `gymenvs.env_ids`) before it loads them, so factories that make envs by id
find them registered under every start method. The default start method is forkserver with gymenvs
preloaded: fork from a process with threads (the thread backend, a trainer, torch) can deadlock the child, and spawn re-imports
everything in every worker; see `DEFAULT_START_METHOD`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import pickle
import selectors
import signal
import sys
import time
import types
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import cloudpickle
import pydantic

from gymenvs.env_ids import WorkerRegistrations, worker_registrations
from wrappers.vector.backends.hosts import HostedSlots, SlotHosts
from wrappers.vector.slot import EnvFactory, Request, SlotError, run_as_worker, timed_out

logger = logging.getLogger(__name__)

#: Start-up of 64 Echo workers (build + first reset) on the 2-core dev machine, measured with
#: examples/benchmarks/vector_startup.py: 0.9 s with fork, 1.8 s with the preloaded forkserver,
#: 22 s with spawn (and 0.4 / 0.8 / 2.6 s for 8 workers). Fork is fastest but unsafe in a parent
#: that runs threads (a trainer, torch, the thread backend): a lock held by another thread at the
#: moment of the fork stays locked forever in the child. So forkserver is the default.
DEFAULT_START_METHOD = "forkserver"
#: Imported once by the forkserver, so that each forked worker starts with them already loaded.
FORKSERVER_PRELOAD = ["gymnasium", "numpy", "pydantic", "cloudpickle", "gymenvs", "wrappers.vector.backends.processes"]

#: How long to wait for a killed worker to be reaped, and for a worker whose pipe closed to report its exit code.
KILLED_WORKER_JOIN_TIMEOUT_S = 5.0
EXIT_CODE_TIMEOUT_S = 1.0

_PENDING = object()


def serve(
    connection: multiprocessing.connection.Connection,
    payload: bytes,
    restart_on_error: bool,
    environment: dict[str, str],
    registrations: WorkerRegistrations,
    inherited: Sequence[multiprocessing.connection.Connection] = (),
) -> None:
    """A worker process's main loop: run each batch of requests on its slots and send the results.

    `inherited`: the parent's ends of other workers' pipes, which a forked worker holds copies of;
    closing them lets those workers see the end of their pipe if the parent dies.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    run_as_worker()
    for other in inherited:
        other.close()
    if os.environ != environment:  # a forkserver child has the forkserver's environment, not ours
        os.environ.clear()
        os.environ.update(environment)
    import gymenvs  # noqa: F401  registers the gymenvs ids for factories that make envs by id

    hosted: HostedSlots | None = None
    try:
        registrations.install()  # the parent's own ids (a user's env), before the factories that may name them load
        hosted = HostedSlots(pickle.loads(payload), restart_on_error)
        load_error = None
    except Exception as exc:
        load_error = SlotError(f"the worker could not load its env factories: {type(exc).__name__}: {exc}")
    try:
        while (message := connection.recv()) is not None:
            request_id, requests = message
            if hosted is None:
                results = [load_error] * len(requests)
            else:
                results = hosted.run(requests)
            _send_results(connection, request_id, results)
    except (EOFError, OSError):
        pass  # the parent is gone
    finally:
        if hosted is not None:
            hosted.close()


def _send_results(connection: multiprocessing.connection.Connection, request_id: int, results: list[Any]) -> None:
    try:
        connection.send((request_id, results))
    except (pickle.PicklingError, TypeError, AttributeError):
        connection.send((request_id, [_picklable(result) for result in results]))


def _picklable(result: Any) -> Any:
    try:
        pickle.dumps(result)
    except Exception as exc:
        if isinstance(result, SlotError):
            return SlotError(result.message, rebuilt=result.rebuilt, reason=result.reason)
        return SlotError(f"the result could not be sent back from the worker process: {type(exc).__name__}: {exc}")
    return result


def _start_forkserver() -> None:
    """Start multiprocessing's forkserver (once per process) with gymenvs preloaded from our `sys.path`.

    Python 3.11's forkserver ignores the parent's `sys.path` when it imports the preload list and
    puts its working directory first, so it could preload nothing, or another checkout's `gymenvs`.
    It does inherit the environment, so `PYTHONPATH` carries our `sys.path` and `PYTHONSAFEPATH`
    keeps the working directory out while it starts. (Workers restore the parent's environment.)
    """
    multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _main_script_hidden() -> Iterator[None]:
    """Start processes that will not run the parent's main script again.

    A spawned or forkserver child imports the parent's `__main__` again, so that objects pickled by
    reference to it resolve. Our workers get everything through cloudpickle, which pickles what
    `__main__` defines by value, so they never need it; and the top-level imports of a training
    script (torch, transformers) would cost seconds in every worker. multiprocessing decides from
    `sys.modules["__main__"]` when a process starts, so a bare module stands in for it meanwhile.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class _Worker:
    """The parent's handle on one worker process and the slots it hosts."""

    def __init__(self, backend: ProcessBackend, number: int, slots: list[int], payload: bytes, restart_on_error: bool):
        self.backend = backend
        self.context = backend.context
        self.number = number
        self.slots = slots
        self.payload = payload
        self.restart_on_error = restart_on_error
        self.process: multiprocessing.process.BaseProcess | None = None
        self.connection: multiprocessing.connection.Connection | None = None

    @property
    def pipe(self) -> multiprocessing.connection.Connection:
        """The parent's end of the running worker's pipe."""
        assert self.connection is not None, "start() first"
        return self.connection

    def start(self) -> None:
        parent_end, child_end = self.context.Pipe()
        inherited = self.backend.open_connections() if self.context.get_start_method() == "fork" else []
        self.process = self.context.Process(
            target=serve,
            args=(child_end, self.payload, self.restart_on_error, dict(os.environ), self.backend.registrations, inherited),
            name=f"gymenvs-vector-worker-{self.number}",
            daemon=True,
        )
        with _main_script_hidden():
            self.process.start()
        child_end.close()  # so that the worker's death closes the pipe for us
        self.connection = parent_end

    def kill(self) -> None:
        if self.process is not None:
            if self.process.is_alive():
                self.process.kill()
            self.process.join(KILLED_WORKER_JOIN_TIMEOUT_S)
        if self.connection is not None:
            self.connection.close()

    def how_it_ended(self) -> str:
        assert self.process is not None
        self.process.join(EXIT_CODE_TIMEOUT_S)
        code = self.process.exitcode
        if code is None:
            return "its pipe closed"
        if code < 0:
            return f"it was killed by {signal.Signals(-code).name}"
        return f"it exited with code {code}"


class ProcessSettings(pydantic.BaseModel):
    """The process backend's own settings (keywords of `ConcurrentVectorEnv`)."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    #: multiprocessing start method; None means `DEFAULT_START_METHOD`.
    start_method: Literal["forkserver", "spawn", "fork"] | None = None


class ProcessBackend:
    Settings = ProcessSettings

    @classmethod
    def start(
        cls, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, settings: ProcessSettings
    ) -> ProcessBackend:
        return cls(factories, max_workers=max_workers, restart_on_error=restart_on_error, start_method=settings.start_method)

    def __init__(
        self,
        factories: Sequence[EnvFactory],
        *,
        max_workers: int,
        restart_on_error: bool,
        start_method: str | None = None,
    ):
        start_method = start_method or DEFAULT_START_METHOD
        self.context: Any = multiprocessing.get_context(start_method)  # typeshed's BaseContext lacks Process
        if start_method == "forkserver":
            _start_forkserver()
        self._hosts = SlotHosts(len(factories), max_workers)
        self.registrations = worker_registrations()
        self._workers = []
        for number, slots in enumerate(self._hosts.slots_of):
            payload = cloudpickle.dumps([(index, factories[index]) for index in slots])
            self._workers.append(_Worker(self, number, slots, payload, restart_on_error))
        self._selector = selectors.DefaultSelector()
        self._request_ids = itertools.count()
        try:
            for worker in self._workers:
                worker.start()
                self._selector.register(worker.pipe, selectors.EVENT_READ, worker)
        except BaseException:
            self.close(timeout_s=0)
            raise

    def open_connections(self) -> list[multiprocessing.connection.Connection]:
        """The parent's ends of the pipes of the workers running now."""
        connections = [worker.connection for worker in self._workers if worker.connection is not None]
        return [connection for connection in connections if not connection.closed]

    def run(self, requests: Sequence[Request], timeout_s: float | None) -> list[Any]:
        """Run the requests, one per slot at most; a result (or `SlotError`) for each, in order."""
        results: list[Any] = [_PENDING] * len(requests)
        batches = {self._workers[host]: positions for host, positions in self._hosts.batches(requests, results).items()}
        request_id = next(self._request_ids)
        waiting: dict[_Worker, list[int]] = {}
        for worker, positions in batches.items():
            try:
                worker.pipe.send((request_id, [requests[position] for position in positions]))
            except (OSError, ValueError):  # the pipe is closed
                reason = f"failed: its worker process was gone ({worker.how_it_ended()})"
                self._replace(worker, requests, positions, results, reason)
            except Exception as exc:  # pickling failed before anything was written: the worker never saw it
                error = SlotError(f"the request could not be sent to the worker process: {type(exc).__name__}: {exc}")
                for position in positions:
                    results[position] = error
            else:
                waiting[worker] = positions
        self._collect(request_id, requests, waiting, results, timeout_s)
        return results

    def close(self, timeout_s: float) -> None:
        """Ask every worker to close its envs and exit; kill those that have not within `timeout_s` s."""
        deadline = time.monotonic() + timeout_s
        started = [(worker, worker.process) for worker in self._workers if worker.process is not None]
        for worker, _ in started:
            try:
                if worker.connection is not None:  # None: the process failed to start
                    worker.connection.send(None)
            except (OSError, ValueError):
                pass
        for worker, process in started:
            process.join(max(0.0, deadline - time.monotonic()))
            worker.kill()
        self._selector.close()

    # -- internals -----------------------------------------------------------------------

    def _collect(
        self,
        request_id: int,
        requests: Sequence[Request],
        waiting: dict[_Worker, list[int]],
        results: list[Any],
        timeout_s: float | None,
    ) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        reason = "was interrupted"
        try:
            while waiting:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    reason = f"{timed_out(timeout_s)}, so its worker process was killed"
                    break
                for key, _ in self._selector.select(remaining):
                    self._receive(key.data, request_id, requests, waiting, results)
        finally:  # on a timeout, and on KeyboardInterrupt too: never leave a worker half-answered
            for worker, positions in list(waiting.items()):
                self._replace(worker, requests, positions, results, reason)

    def _receive(
        self,
        worker: _Worker,
        request_id: int,
        requests: Sequence[Request],
        waiting: dict[_Worker, list[int]],
        results: list[Any],
    ) -> None:
        positions = waiting.pop(worker, [])
        try:
            reply = worker.pipe.recv_bytes()
        except (EOFError, OSError):
            reason = f"failed: its worker process died ({worker.how_it_ended()})"
            self._replace(worker, requests, positions, results, reason)
            return
        try:
            reply_id, replies = pickle.loads(reply)
        except Exception as exc:  # the worker is fine, but this reply is lost: its slots' episodes end
            error = SlotError(f"the worker's reply could not be unpickled: {type(exc).__name__}: {exc}")
            for position in positions:
                results[position] = error
            return
        if reply_id != request_id:  # a late reply to an earlier request: dropped
            if positions:
                waiting[worker] = positions
            return
        for position, reply in zip(positions, replies):
            results[position] = reply

    def _replace(
        self, worker: _Worker, requests: Sequence[Request], positions: list[int], results: list[Any], reason: str
    ) -> None:
        """Restart a worker: its requests here fail (`reason` says how), and its other slots lose their episode."""
        self._hosts.fail(worker.number, requests, positions, results, reason, "its worker process was restarted")
        self._selector.unregister(worker.pipe)
        worker.kill()
        worker.start()
        self._selector.register(worker.pipe, selectors.EVENT_READ, worker)
        logger.warning("worker process %d restarted: a request %s", worker.number, reason)
