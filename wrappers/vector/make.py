"""Building a `ConcurrentVectorEnv` from a registered env id, as `gymnasium.make_vec` does."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401  registers the gymenvs ids
from wrappers.vector.config import setting_names
from wrappers.vector.vector_env import ConcurrentVectorEnv


def make_vector_env(
    env_id: str,
    num_envs: int = 1,
    *,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    **kwargs: Any,
) -> ConcurrentVectorEnv:
    """`num_envs` slots of `gymnasium.make(env_id, **env_kwargs)`. Keywords that name a
    `ConcurrentVectorEnv` setting (`backend`, `max_workers`, `step_timeout_s`, ... and the chosen
    backend's own, such as `start_method` or `address`) configure the vector env; the others go to
    the env. `wrappers` are applied, in order, to each slot's env.

    Each slot is made from the env's spec rather than its id, so worker processes need no registry.
    """
    if type(num_envs) is not int or num_envs <= 0:
        raise ValueError(f"num_envs={num_envs!r}: expected a positive integer")
    names = setting_names(kwargs.get("backend", "thread"))
    settings = {name: kwargs.pop(name) for name in names if name in kwargs}
    factory = functools.partial(gym.make, gym.spec(env_id), **kwargs)
    if wrappers:
        factory = functools.partial(_wrapped, factory, tuple(wrappers))
    return ConcurrentVectorEnv([factory] * num_envs, **settings)


def _wrapped(factory: Callable[[], gym.Env], wrappers: tuple[Callable[[gym.Env], gym.Env], ...]) -> gym.Env:
    env = factory()
    for wrapper in wrappers:
        env = wrapper(env)
    return env
