"""The thread backend with one dedicated thread per slot (`dedicated_threads=True`).

Some envs must be driven from the thread that created them: a browser driver, an EGL context, a
sqlite connection, anything using signal-based timeouts. Here every slot has a thread of its own
for its whole life: its env is built, reset, stepped and closed on that thread only. Requests are
handed over as `concurrent.futures.Future`s and collected with `concurrent.futures.wait`.

A request that misses its deadline retires its thread: the thread finishes the request, closes the
env (on that same thread) and exits, while the slot gets a fresh env on a new thread. The threads
are daemons, so an env stuck forever never keeps the interpreter from exiting.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, wait
from typing import Any

from wrappers.vector.slot import Command, EnvFactory, Request, Slot, SlotError, timed_out

logger = logging.getLogger(__name__)


class SlotThread:
    """A daemon thread that runs every request of one slot, then closes its env when stopped."""

    def __init__(self, slot: Slot):
        self.slot = slot
        self._inbox: queue.SimpleQueue[tuple[Future, Command, Any] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=f"gymenvs-vector-slot-{slot.index}", daemon=True)
        self.thread.start()

    def submit(self, command: Command, argument: Any) -> Future:
        future: Future = Future()
        self._inbox.put((future, command, argument))
        return future

    def stop(self) -> None:
        """Finish the requests already handed over, close the env and exit."""
        self._inbox.put(None)

    def _serve(self) -> None:
        while (item := self._inbox.get()) is not None:
            future, command, argument = item
            if future.set_running_or_notify_cancel():
                future.set_result(self.slot.run(command, argument))
        self.slot.close_quietly()


class DedicatedThreadBackend:
    def __init__(self, factories: Sequence[EnvFactory], *, restart_on_error: bool):
        self._threads = [SlotThread(Slot(index, factory, restart_on_error)) for index, factory in enumerate(factories)]
        self._retired: list[SlotThread] = []

    def run(self, requests: Sequence[Request], timeout_s: float | None) -> list[Any]:
        futures = [self._threads[index].submit(command, argument) for index, command, argument in requests]
        reason = timed_out(timeout_s)
        try:
            wait(futures, timeout_s)
        except BaseException:  # Ctrl-C while waiting: give up on what has not answered
            reason = "was interrupted"
            self._collect(requests, futures, reason)
            raise
        return self._collect(requests, futures, reason)

    def close(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for index, result in enumerate(self.run([(i, Command.CLOSE, None) for i in range(len(self._threads))], timeout_s)):
            if isinstance(result, SlotError):
                logger.warning("slot %d: close failed: %s", index, result.message)
        for slot_thread in self._threads + self._retired:
            slot_thread.stop()
        for slot_thread in self._threads + self._retired:
            slot_thread.thread.join(max(0.0, deadline - time.monotonic()))

    def _collect(self, requests: Sequence[Request], futures: list[Future], reason: str) -> list[Any]:
        results = []
        for (index, command, _), future in zip(requests, futures):
            if future.done():
                results.append(future.result())
            elif future.cancel():
                results.append(SlotError(f"{command.value} {reason} before it started"))
            else:
                self._retire(index)
                message = f"{command.value} {reason}; the env will be rebuilt from its factory"
                results.append(SlotError(message, rebuilt=True))
        return results

    def _retire(self, index: int) -> None:
        """Replace a slot whose request still runs: its thread closes the old env once it returns."""
        old = self._threads[index]
        old.stop()
        self._retired = [slot_thread for slot_thread in self._retired if slot_thread.thread.is_alive()] + [old]
        self._threads[index] = SlotThread(Slot(index, old.slot.factory, old.slot.restart_on_error))
