"""What every backend (thread, process, ray) implements, and the table that picks one by name.

A backend carries the slots of one vector env and runs batches of requests on them. The vector env
only ever calls `run` and `close`; everything a backend alone needs (pinning, a start method, Ray
resources) is a field of its own `Settings` model, so adding a backend adds a row to `BACKENDS`
and touches nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import pydantic

from wrappers.vector.slot import EnvFactory, Request


class Backend(Protocol):
    """Runs requests on slots; each slot's env is built by its factory, in the backend's own worker."""

    #: The backend's own settings (`extra="forbid"`), given to `ConcurrentVectorEnv` as keywords.
    Settings: ClassVar[type[pydantic.BaseModel]]

    @classmethod
    def start(
        cls, factories: Sequence[EnvFactory], *, max_workers: int, restart_on_error: bool, settings: Any
    ) -> Backend:
        """Start the workers for these slots (`max_workers` of them at most)."""
        ...

    def run(self, requests: Sequence[Request], timeout_s: float | None) -> list[Any]:
        """Run the requests (one per slot at most) and return one result per request, in order.

        Never raises for a slot's failure: a failed, lost or late request's result is a
        `SlotError`, and a reply that arrives after `timeout_s` is dropped, never returned later.
        """
        ...

    def close(self, timeout_s: float) -> None:
        """Close every env and stop every worker, giving up on them after `timeout_s` seconds."""
        ...


def backends() -> dict[str, type[Backend]]:
    """The backends by name. Imported here, not at module level, to keep each backend's module
    free to import this one; Ray itself is imported only when a Ray backend starts."""
    from wrappers.vector.backends.processes import ProcessBackend
    from wrappers.vector.backends.ray_actors import RayBackend
    from wrappers.vector.backends.threads import ThreadBackend

    return {"thread": ThreadBackend, "process": ProcessBackend, "ray": RayBackend}
