"""Building a `ConcurrentVectorEnv` from a registered env id, as `gymnasium.make_vec` does."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import gymenvs  # noqa: F401  registers the gymenvs ids
from gymenvs.env_ids import find_spec
from wrappers.vector.config import setting_names
from wrappers.vector.vector_env import ConcurrentVectorEnv


def make_vector_env(
    env_id: str | gym.envs.registration.EnvSpec,
    num_envs: int = 1,
    *,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    **kwargs: Any,
) -> ConcurrentVectorEnv:
    """`num_envs` slots of `gymnasium.make(env_id, **env_kwargs)`. Keywords that name a
    `ConcurrentVectorEnv` setting (`backend`, `max_workers`, `step_timeout_s`, ... and the chosen
    backend's own, such as `start_method` or `address`) configure the vector env; the others go to
    the env. `wrappers` are applied, in order, to each slot's env.

    `env_id` may name the module that registers it, `"pkg.envs:Counting-v0"`. Each slot is made from
    the env's spec rather than its id, so worker processes need no registry.
    An env class marked `thread_affine` gets `dedicated_threads=True` on the thread backend unless
    the caller says otherwise.
    """
    if type(num_envs) is not int or num_envs <= 0:
        raise ValueError(f"num_envs={num_envs!r}: expected a positive integer")
    backend = kwargs.get("backend", "thread")
    names = setting_names(backend)
    settings = {name: kwargs.pop(name) for name in names if name in kwargs}
    spec = find_spec(env_id)
    if backend == "thread" and _is_thread_affine(spec):
        settings.setdefault("dedicated_threads", True)
    factory = functools.partial(gym.make, spec, **kwargs)
    if wrappers:
        factory = functools.partial(_wrapped, factory, tuple(wrappers))
    return ConcurrentVectorEnv([factory] * num_envs, **settings)


def _is_thread_affine(spec: gym.envs.registration.EnvSpec) -> bool:
    from gymnasium.envs.registration import load_env_creator

    creator = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
    return bool(getattr(creator, "thread_affine", False))


def _wrapped(factory: Callable[[], gym.Env], wrappers: tuple[Callable[[gym.Env], gym.Env], ...]) -> gym.Env:
    env = factory()
    for wrapper in wrappers:
        env = wrapper(env)
    return env
