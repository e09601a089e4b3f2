"""Building a `ConcurrentVectorEnv` from a registered env id, as `gymnasium.make_vec` does."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401  registers the gymenvs ids
from wrappers.vector.config import VectorConfig
from wrappers.vector.vector_env import ConcurrentVectorEnv


def make_vector_env(env_id: str, num_envs: int = 1, **kwargs: Any) -> ConcurrentVectorEnv:
    """`num_envs` slots of `gymnasium.make(env_id, **env_kwargs)`. Keywords that name a
    `ConcurrentVectorEnv` setting (`backend`, `max_workers`, `step_timeout_s`, ...) configure the
    vector env; the others go to the env.

    Each slot is made from the env's spec rather than its id, so worker processes need no registry.
    """
    if type(num_envs) is not int or num_envs <= 0:
        raise ValueError(f"num_envs={num_envs!r}: expected a positive integer")
    settings = {name: kwargs.pop(name) for name in VectorConfig.model_fields if name in kwargs}
    factory = functools.partial(gym.make, gym.spec(env_id), **kwargs)
    return ConcurrentVectorEnv([factory] * num_envs, **settings)
