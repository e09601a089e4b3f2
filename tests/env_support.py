"""Envs made for one test and closed after it, whatever the test did."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def envs_made(env_id: str, **defaults):
    """A `make(**kwargs)` that builds envs of `env_id` (with `defaults` under the kwargs), all closed at the end."""
    import gymnasium as gym

    import gymenvs  # noqa: F401

    envs = []

    def make(**kwargs):
        env = gym.make(env_id, **{**defaults, **kwargs})
        envs.append(env)
        return env

    try:
        yield make
    finally:
        for env in envs:
            env.close()
