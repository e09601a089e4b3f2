"""The thread backend: slots run by a pool of threads, for envs that wait (containers, tools, I/O).

A request batch (one `reset`, `step` or `call` of the vector env) becomes the current batch, and
threads take its requests one at a time: `next()` on a shared `itertools.count`, atomic with the
GIL and, since CPython 3.13, without it (free-threaded builds: python/cpython#117657), so no lock
is taken per request. Two choices keep the hot path short:

- Without a deadline the caller's thread takes requests too. A trivial step then runs inline,
  with no thread hand-off at all, while a step that blocks (sleep, socket, subprocess) releases
  the GIL and lets pool threads take the next requests.
- Threads are woken lazily, in a tree. The caller wakes one thread as a watchdog: it joins in
  only once the caller has been stuck in one request for `HELP_AFTER_S` (the request blocks),
  so it never fights the caller for the GIL over trivial requests. Each pool thread that takes a
  request wakes `FAN_OUT` more while requests are left uncovered, so a blocking batch reaches
  every thread in a few rounds of wake-ups.

With a deadline (`step_timeout_s`) the caller only waits. A request that misses it is given up:
its result is a `SlotError`, and if it was already running, its slot is retired (the thread that
still runs it closes the env when it returns, then exits) and replaced by a fresh `Slot` built
from the same factory on its next request, and a new thread replaces the busy one. A reply that
arrives late lands in a batch nobody reads, so it can never reach a later step.

A slot may run on any pool thread (and on the caller's), but never on two at once. For envs that
must stay on one thread (a browser driver, an EGL context, sqlite), `dedicated_threads=True` gives
each slot a thread of its own for its whole life instead: see `dedicated.py`.

Why not `concurrent.futures.ThreadPoolExecutor` (measured with
examples/benchmarks/thread_pool_choice.py; figures in docs/vector.md):

- it is slower: every request pays a hand-off to a pool thread and back, about half the pool's
  throughput on trivial steps and 0.84-0.92x on 10 ms steps;
- a request given up on keeps its executor thread busy, and an executor cannot add a thread to
  replace it, so a few stuck envs would starve every later step;
- its threads are joined at interpreter exit, so one env stuck in a call forever would keep the
  program from exiting; these pool threads are daemons.

The dedicated-thread backend, which pays the hand-off anyway, uses `concurrent.futures` futures and `wait`.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import pydantic
from pydantic import StrictBool

from wrappers.vector.backends.dedicated import DedicatedThreadBackend
from wrappers.vector.slot import STEP, Command, EnvFactory, Request, Slot, SlotError, timed_out

logger = logging.getLogger(__name__)

#: Threads each pool thread wakes when it takes a request and more are waiting.
FAN_OUT = 2
#: How long the caller must be stuck in one request before the watchdog thread joins in. While the
#: caller keeps going, the watchdog checks less and less often (up to every `WATCH_PAUSE_MAX_S`):
#: each check takes the GIL from the caller, which costs a context switch.
HELP_AFTER_S = 100e-6
WATCH_PAUSE_MAX_S = 0.02
#: How long `close()` waits for a thread still running a request that was given up on.
STUCK_GRACE_S = 2.0

_PENDING = object()
_STOP = object()
_HELP = object()  # wake-up token: take requests from the current batch
_WATCH = object()  # wake-up token, with the caller's position: take requests once the caller is stuck in one


class _Batch:
    """The requests of one vector-env call and their results, filled in by whichever thread runs each."""

    __slots__ = ("requests", "slots", "size", "take", "taken", "results", "runners", "done", "lock", "finished", "given_up")

    def __init__(self, requests: Sequence[Request], slots: list[Slot]):
        self.requests = requests
        self.slots = list(slots)  # every slot as the batch began (a retired slot is replaced in the backend's list only)
        self.size = len(requests)
        self.take = itertools.count()  # next(take) is the position of the next request to run
        self.taken = 0  # how many have been taken, as far as the takers have said (for wake-ups only)
        self.results: list[Any] = [_PENDING] * self.size
        self.runners: list[int | None] = [None] * self.size  # the pool thread (ident) running each request
        self.done = itertools.count(1)  # next(done) is how many results are in, counting the one just recorded
        self.lock = threading.Lock()
        self.finished = threading.Lock()  # held until the last result is in
        self.finished.acquire()
        self.given_up = False
        if not requests:
            self.finished.release()

    def finish(self, position: int, result: Any) -> bool:
        """Record a result from a pool thread; False if the batch was given up meanwhile (the result is dropped)."""
        with self.lock:
            if self.given_up:
                return False
            self.record(position, result)
            return True

    def record(self, position: int, result: Any) -> None:
        """Record a result. Without the lock only on the caller's thread: a batch the caller runs
        requests of has no deadline, so only the caller itself can give it up."""
        self.results[position] = result
        if next(self.done) == self.size:
            self.finished.release()


class ThreadSettings(pydantic.BaseModel):
    """The thread backend's own settings (keywords of `ConcurrentVectorEnv`)."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    #: Linux: run the pool threads on one CPU core (see `ConcurrentVectorEnv`).
    pin_threads: StrictBool = False
    #: One thread per slot, for its whole life (construction, every request, close); `max_workers`
    #: does not apply then.
    dedicated_threads: StrictBool = False


class ThreadBackend:
    Settings = ThreadSettings

    @classmethod
    def start(
        cls, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, settings: ThreadSettings
    ) -> ThreadBackend | DedicatedThreadBackend:
        if settings.dedicated_threads:
            return DedicatedThreadBackend(factories, restart_on_error=restart_on_error)
        return cls(factories, max_workers=max_workers, restart_on_error=restart_on_error, pin_threads=settings.pin_threads)

    def __init__(self, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, pin_threads: bool = False):
        self._cpu = shared_core() if pin_threads else None
        self._slots = [Slot(i, factory, restart_on_error) for i, factory in enumerate(factories)]
        self._batch: _Batch | None = None
        self._wakeups: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._wakeup_lock = threading.Lock()
        self._outstanding_wakeups = 0
        self._caller_runs = False  # the caller's thread is taking requests (no deadline)
        self._caller_position: int | None = None  # the request the caller's thread is running
        self._threads: list[threading.Thread] = []
        self._thread_numbers = itertools.count()
        self._retired: list[Slot] = []
        self._stuck_threads: set[threading.Thread] = set()  # running a request that was given up on
        for _ in range(max_workers):
            self._start_thread()

    def run(self, requests: Sequence[Request], timeout_s: float | None) -> list[Any]:
        """Run the requests, one per slot at most; a result (or `SlotError`) for each, in order."""
        batch = self._batch = _Batch(requests, self._slots)
        try:
            if timeout_s is None:
                self._caller_runs = True
                self._run_on_caller(batch)
                self._caller_runs = False
                batch.finished.acquire()
            else:
                self._wake_threads(batch, FAN_OUT, _HELP)
                if not batch.finished.acquire(timeout=timeout_s):
                    self._give_up(batch, timed_out(timeout_s))
        except BaseException:  # KeyboardInterrupt while waiting or while running a step inline
            self._give_up(batch, "was interrupted", caller_position=self._caller_position)
            raise
        finally:
            self._caller_runs = False
            self._caller_position = None
        return batch.results

    def close(self, timeout_s: float) -> None:
        """Close every env (in the pool), stop the threads and wait up to `timeout_s` s for them."""
        deadline = time.monotonic() + timeout_s
        for index, result in enumerate(self.run([(i, Command.CLOSE, None) for i in range(len(self._slots))], timeout_s)):
            if isinstance(result, SlotError):
                logger.warning("slot %d: close failed: %s", index, result.message)
        for _ in self._threads:
            self._wakeups.put(_STOP)
        for thread in self._threads:
            if thread not in self._stuck_threads:
                thread.join(max(0.0, deadline - time.monotonic()))
        for thread in self._stuck_threads:  # they may never return: only a short grace
            thread.join(min(STUCK_GRACE_S, max(0.0, deadline - time.monotonic())))
        for slot in self._retired:  # still running a request we gave up on: try to unblock it
            slot.close_quietly()
        stuck = [thread.name for thread in self._threads if thread.is_alive()]
        if stuck:
            logger.warning("threads still running an env call after close (left as daemons): %s", stuck)

    # -- the caller's thread -------------------------------------------------------------

    def _run_on_caller(self, batch: _Batch) -> None:
        """Take and run requests on the caller's thread until none are left to take."""
        take, size, slots, requests = batch.take, batch.size, batch.slots, batch.requests
        results, done = batch.results, batch.done
        while (position := next(take)) < size:
            batch.taken = position + 1
            self._caller_position = position
            if position + 1 < size and not self._outstanding_wakeups:
                self._wake_threads(batch, 1, (_WATCH, batch, position))  # in case this request blocks
            index, command, argument = requests[position]
            slot = slots[index]
            if command is STEP and (step := slot.next_step) is not None:  # `Slot.run`'s hot path, spared a call
                try:
                    results[position] = step(argument)
                except BaseException as exc:
                    results[position] = slot.failed(command, exc)
            else:
                results[position] = slot.run(command, argument)
            if next(done) == size:  # `batch.record`, spared a call per request
                batch.finished.release()
        self._caller_position = None

    # -- pool threads --------------------------------------------------------------------

    def _start_thread(self) -> None:
        name = f"gymenvs-vector-{next(self._thread_numbers)}"
        thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _serve(self) -> None:
        if self._cpu is not None:
            os.sched_setaffinity(0, {self._cpu})  # on Linux, pid 0 is this thread only
        while (token := self._wakeups.get()) is not _STOP:
            if token is _HELP:
                batch = self._batch
            else:
                _, woken_for, position = cast(tuple[object, _Batch, int], token)
                batch = self._batch_the_caller_is_stuck_in(woken_for, position)
            with self._wakeup_lock:  # a watchdog counts as outstanding until it has decided
                self._outstanding_wakeups -= 1
            if batch is not None and not self._run_on_pool(batch):
                return  # this thread ran a request that was given up on; a new thread has replaced it

    def _batch_the_caller_is_stuck_in(self, woken_for: _Batch, position: int) -> _Batch | None:
        """Watch while the current batch has requests left; it once the caller stays on one request.

        If the caller is still on the request it took when it woke us, it let go of the GIL for it:
        that request blocks, so help at once.
        """
        if self._batch is woken_for and self._caller_position == position and woken_for.taken < woken_for.size:
            return woken_for
        pause = HELP_AFTER_S
        while (batch := self._batch) is not None and batch.taken < batch.size:
            if not self._caller_runs:  # the caller only waits (a deadline is set): help
                return batch
            watched = self._caller_position
            time.sleep(pause)
            if self._batch is batch and self._caller_position == watched and batch.taken < batch.size:
                return batch
            pause = min(2 * pause, WATCH_PAUSE_MAX_S)
        return None

    def _run_on_pool(self, batch: _Batch) -> bool:
        """Take and run requests until none are left; False if one was given up on while it ran."""
        while (position := next(batch.take)) < batch.size:
            batch.taken = position + 1
            if position + 1 < batch.size:
                self._wake_threads(batch, FAN_OUT, _HELP)
            with batch.lock:
                if batch.given_up:
                    return True
                batch.runners[position] = threading.get_ident()
            index, command, argument = batch.requests[position]
            slot = batch.slots[index]
            if not batch.finish(position, slot.run(command, argument)):
                slot.close_quietly()  # given up while it ran: the slot was replaced, its env is ours to close
                return False
        return True

    def _wake_threads(self, batch: _Batch, count: int, token: object) -> None:
        """Wake up to `count` threads, but never more than there are requests no wake-up covers."""
        with self._wakeup_lock:
            wanted = min(count, batch.size - batch.taken - self._outstanding_wakeups)
            if wanted <= 0:
                return
            self._outstanding_wakeups += wanted
        for _ in range(wanted):
            self._wakeups.put(token)

    # -- giving up -----------------------------------------------------------------------

    def _give_up(self, batch: _Batch, reason: str, caller_position: int | None = None) -> None:
        """Fill in every missing result with an error (`reason` says what happened to the request);
        replace the slots whose request still runs (`caller_position`: the caller's own, if any)."""
        with batch.lock:
            batch.given_up = True
            for position, result in enumerate(batch.results):
                if result is not _PENDING:
                    continue
                index, command, _ = batch.requests[position]
                runner = threading.get_ident() if position == caller_position else batch.runners[position]
                if runner is None:
                    batch.results[position] = SlotError(f"{command.value} {reason} before it started: every thread was busy")
                    continue
                self._retire(index, runner)
                message = f"{command.value} {reason}; the env will be rebuilt from its factory"
                batch.results[position] = SlotError(message, rebuilt=True)

    def _retire(self, index: int, runner: int) -> None:
        """Replace a slot whose request is still running; the thread running it is replaced too."""
        old = self._slots[index]
        self._retired = [slot for slot in self._retired if slot.env is not None] + [old]
        self._slots[index] = Slot(index, old.factory, old.restart_on_error)
        if runner != threading.get_ident():  # a pool thread, busy until that request returns
            stuck = {thread for thread in self._threads if thread.ident == runner}
            self._stuck_threads = {thread for thread in self._stuck_threads if thread.is_alive()} | stuck
            self._start_thread()


def shared_core() -> int | None:
    """The CPU core the pool threads share: the last one this process may use (None: no choice to make)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cores = os.sched_getaffinity(0)
    return max(cores) if len(cores) > 1 else None
