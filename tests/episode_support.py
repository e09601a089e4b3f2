"""Episodes (or commands) that a module's tests share: each played once, several at a time in threads, and kept for
the tests that assert on them. Imported as `episode_support` (pytest puts tests/ on the path).

- `play_all(plays, workers)`: any callables (`key -> play()`), by key what each returned or raised (`Played`);
  one that raised fails only the tests that read it, naming it and saying why.
- `play_episodes(episodes, workers)`: scripted episodes, each in an env of its own, made, reset, stepped through its
  actions and closed in one worker thread (the env, the engine and grading are thread-safe). An episode stops
  early when a step ends it (terminated or truncated) or when something raises. A test reads only its own
  episode: `reset()` is what `env.reset()` returned, `step(i)` what the i-th `env.step` returned; asking for what
  the episode never reached fails naming the episode and saying why (the traceback, or how it ended).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
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


@dataclass
class Episode:
    name: str
    #: The env it was played in (closed by now: its configuration is still there to read).
    env: Any = None
    #: `env.reset()`'s (observation, info), and each `env.step`'s (observation, reward, terminated, truncated, info).
    reset_returned: tuple[Any, dict] | None = None
    steps: list[tuple[Any, float, bool, bool, dict]] = field(default_factory=list)
    #: The traceback of what raised while it was played (making, resetting, stepping or closing the env).
    error: str | None = None

    def reset(self) -> tuple[Any, dict]:
        assert self.reset_returned is not None, f"episode {self.name}: the reset did not return: {self.error}"
        return self.reset_returned

    def step(self, i: int) -> tuple[Any, float, bool, bool, dict]:
        if i < len(self.steps):
            return self.steps[i]
        if self.error is not None:
            why = self.error
        elif self.steps and (self.steps[-1][2] or self.steps[-1][3]):
            observation, reward, terminated, truncated, info = self.steps[-1]
            why = (f"step {len(self.steps) - 1} ended it (terminated={terminated}, truncated={truncated}, reward={reward}, "
                   f"error={info.get('error')!r}): {str(observation)[-1000:]}")
        else:
            why = f"it was given {len(self.steps)} actions"
        raise AssertionError(f"episode {self.name}: no step {i}: {why}")


def play(name: str, make: Callable[[], Any], actions: Sequence[Any]) -> Episode:
    """Play one episode in a new env from `make()`: reset it, step it with each action until one ends it, close it."""
    episode = Episode(name)
    try:
        episode.env = env = make()
        try:
            episode.reset_returned = env.reset()
            for action in actions:
                episode.steps.append(env.step(action))
                if episode.steps[-1][2] or episode.steps[-1][3]:
                    break
        finally:
            env.close()
    except Exception:
        episode.error = traceback.format_exc()
    return episode


def play_episodes(episodes: Mapping[Hashable, tuple[str, Callable[[], Any], Sequence[Any]]],
                  workers: int) -> dict[Hashable, Episode]:
    """Every scripted episode (key -> (name, make, actions)) played, `workers` at a time: key -> its `Episode`."""
    played = play_all({key: partial(play, *episode) for key, episode in episodes.items()}, workers)
    return {key: outcome.result() for key, outcome in played.items()}  # `play` keeps its own errors
