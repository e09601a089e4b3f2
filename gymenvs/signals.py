"""SIGTERM as an ordinary exit, on request: `with exit_on_sigterm(): ...`.

gymenvs installs no signal handler by itself: importing it, or building an env, leaves the process's
handlers as they are. What an env holds (containers, channel directories, browsers) goes at `close()`,
when a `with gymnasium.make(...) as env:` block ends, or at interpreter exit when the env was forgotten;
what a killed process leaves behind is reaped by the next gymenvs process. A SIGTERM (what Slurm and
Kubernetes send) kills a Python process without running any of that, unless it is turned into an exit:
this context manager does so while it is open, the `gymenvs` command does so for every command, and a
training script does so with one line around its work.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The exit status of a process that a SIGTERM ended (128 + 15), as a shell reports it.
EXIT_TERMINATED = 128 + signal.SIGTERM


@contextmanager
def exit_on_sigterm() -> Iterator[None]:
    """While open, a SIGTERM raises `SystemExit(143)` in the main thread: `finally` blocks, `close()` and the
    exit handlers run, so every container is removed before the process ends. The handler does no work
    itself. Left alone (nothing installed) outside the main thread or when the process already has a
    SIGTERM handler of its own; the previous handler is back when the block ends."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        raise SystemExit(EXIT_TERMINATED)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
