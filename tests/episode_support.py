"""Scripted episodes played once for a module, several at a time, with what each step returned kept for the
tests that assert on it (tests/container/agent/test_agent_clis.py, tests/terminal/test_agent_clis.py).

Each episode is played in an env of its own, made, reset, stepped through its actions and closed in one worker
thread (the env, the engine and grading are thread-safe). An episode stops early when a step ends it
(terminated or truncated) or when something raises. A test reads only its own episode: `reset()` is what
`env.reset()` returned, `step(i)` what the i-th `env.step` returned; asking for what the episode never reached
fails naming the episode and saying why (the traceback of what raised, or how it ended)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Episode", "play", "play_all"]


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


def play_all(episodes: Mapping[Any, tuple[str, Callable[[], Any], Sequence[Any]]], workers: int) -> dict[Any, Episode]:
    """Every episode (key -> (name, make, actions)) played, `workers` at a time: key -> its `Episode`."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {key: pool.submit(play, *episode) for key, episode in episodes.items()}
        return {key: future.result() for key, future in futures.items()}
