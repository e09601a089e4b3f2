"""The thread backend: slots run by a pool of threads, for envs that wait (containers, tools, I/O).

A request batch (one `reset`, `step` or `call` of the vector env) goes into a shared queue, and the
pool's threads take requests from it. Two choices keep the hot path short:

- Without a deadline the caller's thread works through the queue too. A trivial step then runs
  inline, with no thread hand-off at all, while a step that blocks (sleep, socket, subprocess)
  releases the GIL and lets pool threads take the next requests.
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

A slot may run on any pool thread (and on the caller's), but never on two at once.
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import threading
import time
from typing import Any, Sequence

from wrappers.vector.slot import EnvFactory, Slot, SlotError

logger = logging.getLogger(__name__)

#: Threads each pool thread wakes when it takes a request and more are waiting.
FAN_OUT = 2
#: How long the caller must be stuck in one request before the watchdog thread joins in.
HELP_AFTER_S = 100e-6

#: How long `close()` waits for a thread still running a request that was given up on.
STUCK_GRACE_S = 2.0

Request = tuple[int, str, Any]  # (slot index, command, argument)

_PENDING = object()
_STOP = object()
_HELP = object()  # wake-up token: take requests from the queue
_WATCH = object()  # wake-up token: take requests once the caller is stuck in one


class _Batch:
    """The requests of one vector-env call and their results, filled in by whichever thread runs each."""

    __slots__ = ("requests", "slots", "results", "runners", "remaining", "lock", "finished", "given_up")

    def __init__(self, requests: Sequence[Request], slots: list[Slot]):
        self.requests = requests
        self.slots = [slots[index] for index, _, _ in requests]
        self.results: list[Any] = [_PENDING] * len(requests)
        self.runners: list[int | None] = [None] * len(requests)  # the thread (ident) that took each request
        self.remaining = len(requests)
        self.lock = threading.Lock()
        self.finished = threading.Lock()  # held until the last result is in
        self.finished.acquire()
        self.given_up = False
        if not requests:
            self.finished.release()


class ThreadBackend:
    def __init__(self, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool):
        self._slots = [Slot(i, factory, restart_on_error) for i, factory in enumerate(factories)]
        self._queue: collections.deque[tuple[_Batch, int]] = collections.deque()
        self._wakeups: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._wakeup_lock = threading.Lock()
        self._outstanding_wakeups = 0
        self._caller_working = False  # the caller's thread is working through the queue
        self._caller_progress = 0  # requests the caller's thread has taken
        self._threads: list[threading.Thread] = []
        self._thread_numbers = itertools.count()
        self._retired: list[Slot] = []
        self._stuck_threads: set[threading.Thread] = set()  # running a request that was given up on
        for _ in range(max_workers):
            self._start_thread()

    def run(self, requests: Sequence[Request], timeout: float | None) -> list[Any]:
        """Run the requests, one per slot at most; a result (or `SlotError`) for each, in order."""
        batch = _Batch(requests, self._slots)
        self._queue.extend((batch, position) for position in range(len(requests)))
        try:
            if timeout is None:
                self._caller_working = True
                try:
                    self._work_through_queue(on_pool_thread=False)
                finally:
                    self._caller_working = False
                batch.finished.acquire()
            else:
                self._wake_threads(FAN_OUT, _HELP)
                if not batch.finished.acquire(timeout=timeout):
                    self._give_up(batch, f"timed out (no reply within step_timeout_s={timeout} s)")
        except BaseException:  # KeyboardInterrupt while waiting or while running a step inline
            self._give_up(batch, "was interrupted")
            raise
        return batch.results

    def close(self, timeout: float) -> None:
        """Close every env (in the pool), stop the threads and wait up to `timeout` s for them."""
        deadline = time.monotonic() + timeout
        for index, result in enumerate(self.run([(i, "close", None) for i in range(len(self._slots))], timeout)):
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

    # -- workers -------------------------------------------------------------------------

    def _start_thread(self) -> None:
        name = f"gymenvs-vector-{next(self._thread_numbers)}"
        thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _serve(self) -> None:
        while (token := self._wakeups.get()) is not _STOP:
            helping = token is _HELP or self._caller_is_stuck()
            with self._wakeup_lock:  # a watchdog counts as outstanding until it has decided
                self._outstanding_wakeups -= 1
            if helping and not self._work_through_queue(on_pool_thread=True):
                return  # this thread ran a request that was given up on; a new thread has replaced it

    def _caller_is_stuck(self) -> bool:
        """Watch the caller while requests are queued: True once it takes no new one for a while."""
        while self._queue:
            if not self._caller_working:  # the caller only waits (a deadline is set): help
                return True
            progress = self._caller_progress
            time.sleep(HELP_AFTER_S)
            if self._caller_progress == progress and self._caller_working and self._queue:
                return True
        return False

    def _work_through_queue(self, on_pool_thread: bool) -> bool:
        """Run queued requests until none are left; False if one of them was given up on meanwhile.

        Whenever it takes a request and more are waiting, a pool thread wakes up to `FAN_OUT` more
        threads; the caller's thread makes sure one watchdog is on its way, in case its request blocks.
        """
        pending = self._queue
        while True:
            try:
                batch, position = pending.popleft()
            except IndexError:
                return True
            if on_pool_thread:
                if pending:
                    self._wake_threads(FAN_OUT, _HELP)
                if not self._run_one(batch, position):
                    return False
            else:
                if pending and not self._outstanding_wakeups:
                    self._wake_threads(1, _WATCH)
                self._caller_progress += 1
                self._run_one(batch, position)

    def _run_one(self, batch: _Batch, position: int) -> bool:
        with batch.lock:
            if batch.given_up:
                return True
            batch.runners[position] = threading.get_ident()
        slot = batch.slots[position]
        _, command, argument = batch.requests[position]
        result = slot.run(command, argument)
        with batch.lock:
            if not batch.given_up:
                batch.results[position] = result
                batch.remaining -= 1
                if batch.remaining == 0:
                    batch.finished.release()
                return True
        slot.close_quietly()  # given up while it ran: the slot has been replaced, its env is ours to close
        return False

    def _wake_threads(self, count: int, token: object) -> None:
        """Wake up to `count` threads, but never more than there are queued requests no wake-up covers."""
        with self._wakeup_lock:
            wanted = min(count, len(self._queue) - self._outstanding_wakeups)
            if wanted <= 0:
                return
            self._outstanding_wakeups += wanted
        for _ in range(wanted):
            self._wakeups.put(token)

    def _give_up(self, batch: _Batch, reason: str) -> None:
        """Fill in every missing result with an error (`reason` says what happened to the request);
        replace the slots whose request still runs."""
        with batch.lock:
            batch.given_up = True
            missing = [position for position, result in enumerate(batch.results) if result is _PENDING]
            for position in missing:
                index, command, _ = batch.requests[position]
                if batch.runners[position] is not None:
                    self._retire(index, batch.runners[position])
                    message = f"{command} {reason}; the env will be rebuilt from its factory"
                    batch.results[position] = SlotError(message, rebuilt=True)
                else:
                    batch.results[position] = SlotError(f"{command} {reason} before it started: every thread was busy")

    def _retire(self, index: int, runner: int) -> None:
        """Replace a slot whose request is still running; the thread running it is replaced too."""
        old = self._slots[index]
        self._retired = [slot for slot in self._retired if slot.env is not None] + [old]
        self._slots[index] = Slot(index, old.factory, old.restart_on_error)
        if runner != threading.get_ident():  # a pool thread, busy until that request returns
            stuck = {thread for thread in self._threads if thread.ident == runner}
            self._stuck_threads = {thread for thread in self._stuck_threads if thread.is_alive()} | stuck
            self._start_thread()
