"""Fixtures of the agent env tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def make_agent_env(swe_images):
    """Build SWEAgent-v0 envs for a test (the agent's calls may wait 60 s) and close them all afterwards."""
    import gymnasium as gym

    import gymenvs  # noqa: F401

    envs = []

    def make(**kwargs):
        kwargs.setdefault("call_timeout_s", 60.0)
        env = gym.make("gymenvs/SWEAgent-v0", **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()
