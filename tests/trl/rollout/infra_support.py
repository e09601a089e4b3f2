"""Test envs whose episodes end `infra` on chosen seeds, deterministically, for the TRL bridge's retry tests."""

from __future__ import annotations

import threading
from collections import Counter

import gymnasium as gym

from gymenvs.core.outcomes import EndedBy, ending
from gymenvs.envs.echo import EchoEnv


class InfraEcho(EchoEnv):
    """Echo whose first step ends the episode `infra` (reward 0, truncated), or whose reset raises (`at="reset"`),
    on the first `failures` attempts of each seed in `failing_seeds`; any other episode is Echo's (reward 1 a
    turn). Attempts are counted per seed in a counter shared by every instance and thread
    (`InfraEcho.reset_attempts()` clears it)."""

    attempts: Counter[int] = Counter()
    _lock = threading.Lock()

    def __init__(self, failing_seeds: tuple[int, ...] = (), failures: int = 1, at: str = "step", **kwargs):
        super().__init__(**kwargs)
        self.failing_seeds, self.failures, self.at = tuple(failing_seeds), failures, at
        self._failing = False

    @classmethod
    def reset_attempts(cls) -> None:
        with cls._lock:
            cls.attempts.clear()

    def reset(self, *, seed=None, options=None):
        with self._lock:
            self.attempts[seed] += 1
            self._failing = seed in self.failing_seeds and self.attempts[seed] <= self.failures
        if self._failing and self.at == "reset":
            raise RuntimeError("no sandbox could start")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if self._failing:
            return observation, 0.0, False, True, {**info, **ending(EndedBy.INFRA, "grading_timeout", "test fault")}
        return observation, reward, terminated, truncated, info


ENV_ID = "gymenvs_tests/InfraEcho-v0"


def register() -> str:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=InfraEcho)
    InfraEcho.reset_attempts()
    return ENV_ID
