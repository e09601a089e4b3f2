"""Building a `ConcurrentVectorEnv` from a registered env id, as `gymnasium.make_vec` does."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

import gymenvs  # noqa: F401  registers the gymenvs ids
from gymenvs.core.config import keyword_names
from gymenvs.core.errors import ConfigError, did_you_mean, listing, short_repr
from gymenvs.env_ids import find_spec
from wrappers.vector.backend import backends
from wrappers.vector.config import make_config, setting_names
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
    make_config(**settings)  # a bad vector setting is raised before the env's arguments are looked at
    spec = find_spec(env_id)
    check_env_kwargs(spec, kwargs, backend)
    if backend == "thread" and _is_thread_affine(spec):
        settings.setdefault("dedicated_threads", True)
    factory = functools.partial(gym.make, spec, **kwargs)
    if wrappers:
        factory = functools.partial(_wrapped, factory, tuple(wrappers))
    return ConcurrentVectorEnv([factory] * num_envs, **settings)


#: What `gymnasium.make` itself takes besides the env's arguments (max_episode_steps, disable_env_checker).
_MAKE_KEYWORDS = [name for name, param in inspect.signature(gym.make).parameters.items() if param.default is not param.empty]


def check_env_kwargs(spec: EnvSpec, env_kwargs: dict[str, Any], backend: str) -> None:
    """Raise a `ConfigError` for a keyword that is neither the env's nor the vector env's, here in the
    caller rather than once per slot; one of another backend's settings says which backend it belongs to.
    An env whose accepted names are unknown (a creator taking `**kwargs`) checks its own, in its slots."""
    creator = _creator(spec)
    accepted = keyword_names(creator, {**spec.kwargs, **env_kwargs}) if creator is not None else None
    if accepted is None:
        return
    vector_names = setting_names(backend)
    for name, value in env_kwargs.items():
        if name in accepted or name in _MAKE_KEYWORDS:
            continue
        given = f"{name}={short_repr(value)}"
        owners = [other for other in backends() if name in setting_names(other)]
        if owners:
            raise ConfigError(
                f"make_vec({spec.id!r}): {given} is a setting of the vector env's {owners[0]!r} backend, not of "
                f"backend={backend!r} nor an argument of the env: pass backend={owners[0]!r} with it"
            )
        raise ConfigError(
            f"make_vec({spec.id!r}) got an unknown argument {given}{did_you_mean(name, [*accepted, *vector_names])}. "
            f"The env accepts: {listing(accepted)}; the vector env (backend={backend!r}): {listing(vector_names)}."
        )


def _creator(spec: EnvSpec) -> Callable[..., Any] | None:
    from gymnasium.envs.registration import load_env_creator

    return load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point


def _is_thread_affine(spec: EnvSpec) -> bool:
    return bool(getattr(_creator(spec), "thread_affine", False))


def _wrapped(factory: Callable[[], gym.Env], wrappers: tuple[Callable[[gym.Env], gym.Env], ...]) -> gym.Env:
    env = factory()
    for wrapper in wrappers:
        env = wrapper(env)
    return env
