"""Helpers for the vector env tests: an echo env that fails on purpose, vector envs of it, and leak checks.

Kept out of the test modules so that process workers unpickling these factories import only this
small module, not pytest and the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from gymenvs.core import Outcome, TextEnv, ToolCall, tool
from wrappers.vector import ConcurrentVectorEnv

#: The tests folder (on the path of pytest and of every worker: this module is `vector.vector_support`).
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPOSITORY = os.path.dirname(TESTS)
BACKENDS = ["thread", "process", "ray"]


class FaultyEcho(TextEnv):
    """Echoes free text back (reward 1), except for these messages:

    `raise <text>` raises RuntimeError, `sysexit` raises SystemExit, `exit <code>` ends the process
    with `os._exit`, `kill` sends the process SIGKILL, `sleep <seconds>` sleeps and then answers
    `slept <seconds>`, `interrupt` raises KeyboardInterrupt, `cancel` raises
    asyncio.CancelledError, `unpicklable` raises an exception that pickles but cannot be unpickled.
    `reset(options={"fail": True})` raises. `state()` names the instance and its process.
    """

    default_max_turns = 100
    reset_option_keys = frozenset({"fail"})

    def __init__(self, *, max_turns: int | None = None):
        super().__init__(max_turns=max_turns)
        self.instance_id = uuid.uuid4().hex
        self.closed = False
        self.label = "default"

    def _start_episode(self, options: dict[str, Any]) -> str:
        if options.get("fail"):
            raise RuntimeError("reset failed on purpose")
        return "ready"

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("say", {"message": text})

    @tool
    def say(self, message: str) -> Outcome:
        """Say something.

        Args:
            message: What to say.
        """
        command, _, argument = message.partition(" ")
        if command == "raise":
            raise RuntimeError(f"boom {argument}")
        if command == "sysexit":
            raise SystemExit(4)
        if command == "interrupt":
            raise KeyboardInterrupt
        if command == "cancel":
            raise asyncio.CancelledError
        if command == "unpicklable":
            raise UnpicklableError("needs", "two arguments")
        if command == "exit":
            os._exit(int(argument or 3))
        if command == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if command == "sleep":
            started = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the machine
            time.sleep(float(argument))
            self.last_sleep = (started, time.monotonic())
            return Outcome(f"slept {argument}", reward=1.0)
        return Outcome(message, reward=1.0)

    def whoami(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "pid": os.getpid(), "label": self.label,
                "last_sleep": getattr(self, "last_sleep", None)}

    def _episode_state(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id}

    def close(self) -> None:
        self.closed = True
        super().close()


class UnpicklableError(Exception):
    """Pickles as `UnpicklableError(message)`, which its constructor refuses."""

    def __init__(self, first: str, second: str):
        super().__init__(f"{first} {second}")


def our_threads() -> list[threading.Thread]:
    """The live threads of thread-backend pools."""
    return [thread for thread in threading.enumerate() if thread.name.startswith("gymenvs-vector-")]


def our_processes() -> list[multiprocessing.process.BaseProcess]:
    """The live worker processes of process backends."""
    return [process for process in multiprocessing.active_children() if process.name.startswith("gymenvs-vector-")]


@contextlib.contextmanager
def local_ray() -> Iterator[None]:
    """One small local Ray for the whole test session (started by the first user, stopped at the end).

    Every actor is a process of its own (~100 MB), so tests keep their slot counts modest. The
    workers get the tests folder on their path, to unpickle the helpers defined here.
    """
    import ray

    if ray.is_initialized():
        yield
        return
    python_path = os.pathsep.join([TESTS, REPOSITORY, os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        log_to_driver=False,
        resources={"docker": 4},  # a custom resource, as SWE slots would ask for on a cluster
        runtime_env={"env_vars": {"PYTHONPATH": python_path}},
    )
    try:
        yield
    finally:
        from wrappers.vector.backends.ray_actors import release_idle_actors

        release_idle_actors()
        ray.shutdown()


def faulty_echo_vector(backend: str, num_envs: int, *, max_turns: int, **settings: Any) -> ConcurrentVectorEnv:
    """`num_envs` slots of `FaultyEcho(max_turns=max_turns)` on this backend."""
    return ConcurrentVectorEnv([functools.partial(FaultyEcho, max_turns=max_turns)] * num_envs, backend=backend, **settings)
