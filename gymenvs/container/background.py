"""Work started in a thread of its own, its result a future: for a step that overlaps two waits on the engine."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def in_thread(function: Callable[[], T], name: str = "gymenvs-background") -> Future[T]:
    """`function` run in a new daemon thread; its future (the result, or the exception it raised)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(function())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
