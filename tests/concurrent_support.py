"""Episodes (or commands) that a module's tests share: each played once, several at a time in threads, and kept for
the tests that assert on them. Imported as `concurrent_support` (pytest puts tests/ on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


class EpisodeFailed(AssertionError):
    """A played episode raised: its name and why (the original error is chained)."""


@dataclass(frozen=True)
class Played:
    """One episode as it was played: what it kept, or the error it raised; and how long it took."""

    name: str
    value: Any
    error: BaseException | None
    seconds: float

    def result(self) -> Any:
        """What the episode kept; if it raised, an `EpisodeFailed` that names it and says why."""
        if self.error is not None:
            raise EpisodeFailed(f"episode {self.name} failed after {self.seconds:.1f} s: {self.error!r}") from self.error
        return self.value


def play_all(plays: Mapping[Hashable, Callable[[], Any]], workers: int) -> dict[Hashable, Played]:
    """Call every play, `workers` at a time; by key, what each kept or raised (one failing fails only its own tests)."""

    def played(key: Hashable, play: Callable[[], Any]) -> Played:
        started = time.monotonic()
        try:
            value, error = play(), None
        except Exception as exc:  # kept for the test that asserts on this episode
            value, error = None, exc
        name = " ".join(map(str, key)) if isinstance(key, tuple) else str(key)
        return Played(name, value, error, time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(played, key, play) for key, play in plays.items()}
        return {key: future.result() for key, future in futures.items()}
