"""Building a `ConcurrentVectorEnv` from a registered env id, as `gymnasium.make_vec` does."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

import gymenvs  # noqa: F401  registers the gymenvs ids
from wrappers.vector.vector_env import ConcurrentVectorEnv


def make_vector_env(
    env_id: str,
    num_envs: int = 1,
    *,
    backend: str = "thread",
    max_workers: int | None = None,
    step_timeout_s: float | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    restart_on_error: bool = True,
    start_method: str | None = None,
    pin_threads: bool = True,
    **env_kwargs: Any,
) -> ConcurrentVectorEnv:
    """`num_envs` slots of `gymnasium.make(env_id, **env_kwargs)`; the other keywords configure the vector env.

    Each slot is made from the env's spec rather than its id, so worker processes need no registry.
    """
    if type(num_envs) is not int or num_envs <= 0:
        raise ValueError(f"num_envs={num_envs!r}: expected a positive integer")
    factory = functools.partial(gym.make, gym.spec(env_id), **env_kwargs)
    return ConcurrentVectorEnv(
        [factory] * num_envs,
        backend=backend,
        max_workers=max_workers,
        step_timeout_s=step_timeout_s,
        autoreset_mode=autoreset_mode,
        restart_on_error=restart_on_error,
        start_method=start_method,
        pin_threads=pin_threads,
    )
