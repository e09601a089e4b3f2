"""Registers every gymenvs environment with gymnasium under the `gymenvs/` namespace.

Entry points are strings, so registering imports no env module: `gymnasium.make` imports
the one it builds (and its heavy dependencies) on first use. The vector entry point makes
`gymnasium.make_vec(id, num_envs=N)` return a `wrappers.vector.ConcurrentVectorEnv`
(`backend="process"` and its other settings are keywords of `make_vec`; the rest go to the env);
`vector_entry_point(id)` gives envs that users register themselves the same. Gymnasium refuses
`make_vec(..., wrappers=...)` for any env with a vector entry point; `gymenvs.make_vec` takes them.
`probe(id, kwargs)` checks an id and its kwargs by building one env, as the TRL bridge does before training.
Ids of a user's own envs may name the module that registers them, `"pkg.envs:Name-v0"` (`gymenvs.env_ids`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, VectorizeMode, load_env_creator
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import create_shared_memory

from gymenvs.core.errors import ConfigError, short_repr
from gymenvs.core.spaces import UnicodeText
from gymenvs.env_ids import find_spec


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    #: The constructor's keywords the id fixes (a container env's task family), as `EnvSpec.kwargs`.
    kwargs: Mapping[str, Any] = field(default_factory=dict)


SWE = {"family": "gymenvs.swe.family:SWEFamily"}
HARBOR = {"family": "gymenvs.terminal.family:HarborFamily"}


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        "gymenvs/Echo-v0", "gymenvs.envs.echo:EchoEnv", "Echoes a message back; per-step sleep and CPU knobs for benchmarks."
    ),
    EnvEntry(
        "gymenvs/ReasoningGym-v0",
        "gymenvs.envs.reasoning:ReasoningGymEnv",
        "One reasoning_gym question per episode (any dataset or a composite), scored by the dataset.",
    ),
    EnvEntry("gymenvs/Wordle-v0", "gymenvs.envs.wordle:WordleEnv", "Find the hidden five-letter word in six guesses."),
    EnvEntry("gymenvs/Sudoku-v0", "gymenvs.envs.sudoku:SudokuEnv", "Solve a generated 9x9 Sudoku with a unique solution."),
    EnvEntry("gymenvs/Catch-v0", "gymenvs.envs.catch:CatchEnv", "Move a paddle left, stay or right to catch a falling ball."),
    EnvEntry(
        "gymenvs/TextArena-v0",
        "gymenvs.envs.textarena:make_textarena_env",
        "Any TextArena game (game=...), single-player or against an opponent policy.",
    ),
    EnvEntry(
        "gymenvs/MiniWoB-v0",
        "gymenvs.envs.miniwob:MiniWoBEnv",
        "A MiniWoB++ web task (task=...) in headless Chromium; page text, optionally a screenshot.",
    ),
    EnvEntry(
        "gymenvs/SWE-v0",
        "gymenvs.container.tools_env:ToolsEnv",
        "Fix a repository's issue in a Docker container; graded host-side by its FAIL_TO_PASS / PASS_TO_PASS tests.",
        SWE,
    ),
    EnvEntry(
        "gymenvs/SWEAgent-v0",
        "gymenvs.container.agent.env:AgentEnv",
        "An agent program runs in the task container; its LLM calls are the env's steps (or go to an upstream).",
        SWE,
    ),
    EnvEntry(
        "gymenvs/Terminal-v0",
        "gymenvs.container.tools_env:ToolsEnv",
        "A Harbor-format task (Terminal-Bench 2, its adapters) in its container, with SWE-v0's tools; graded by its tests.",
        HARBOR,
    ),
    EnvEntry(
        "gymenvs/TerminalAgent-v0",
        "gymenvs.container.agent.env:AgentEnv",
        "SWEAgent-v0's agents on Harbor-format tasks; the agent's LLM calls are the env's steps (or go to an upstream).",
        HARBOR,
    ),
)


#: `make_vec`'s creator for an env id, imported only when `make_vec` is called.
VECTOR_ENTRY_POINT = "wrappers.vector.registered:{id}"


def vector_entry_point(env_id: str) -> str:
    """The `vector_entry_point` that makes `gymnasium.make_vec(env_id, ...)` return a
    `ConcurrentVectorEnv`, for an env you register yourself:

        gym.register("my/Env-v0", entry_point=MyEnv, vector_entry_point=gymenvs.vector_entry_point("my/Env-v0"))
    """
    return VECTOR_ENTRY_POINT.format(id=env_id)


def make_vec(
    env_id: str | EnvSpec,
    num_envs: int = 1,
    *,
    vectorization_mode: VectorizeMode | str | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Wrapper]] | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """`gymnasium.make_vec`, except that `wrappers` work with a vector entry point too.

    Gymnasium refuses `wrappers=` whenever the env's `vector_entry_point` builds the vector env,
    which is every gymenvs id. Here its creator gets them as a keyword instead: gymenvs' creator
    (`vector_entry_point(id)`, a `ConcurrentVectorEnv`) applies them, in order, to each slot's env.
    Every other call goes to `gymnasium.make_vec` unchanged.
    """
    spec = find_spec(env_id)
    entry_point = spec.vector_entry_point
    entry_point_mode = (None, VectorizeMode.VECTOR_ENTRY_POINT, VectorizeMode.VECTOR_ENTRY_POINT.value)
    by_entry_point = entry_point is not None and vectorization_mode in entry_point_mode
    if by_entry_point and kwargs.get("vector_kwargs"):
        vector_kwargs = kwargs["vector_kwargs"]
        as_keywords = ", ".join(f"{name}={value!r}" for name, value in dict(vector_kwargs).items())
        raise ConfigError(f"vector_kwargs={short_repr(vector_kwargs)}: the vector env of {spec.id} takes its settings as "
                          f"plain keywords: make_vec({spec.id!r}, {num_envs}, {as_keywords})")
    if not wrappers or entry_point is None or not by_entry_point:
        return gym.make_vec(spec, num_envs, vectorization_mode=vectorization_mode, wrappers=wrappers, **kwargs)
    kwargs.pop("vector_kwargs", None)
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    vector_env = creator(num_envs=num_envs, wrappers=list(wrappers), **kwargs)
    if not isinstance(vector_env, VectorEnv):
        raise TypeError(f"the vector entry point of {spec.id} returned {vector_env!r}, not a VectorEnv")
    return vector_env


def register_envs() -> None:
    for entry in ENVS:
        if entry.id not in gym.registry:
            gym.register(entry.id, entry_point=entry.entry_point, vector_entry_point=vector_entry_point(entry.id),
                         kwargs=dict(entry.kwargs))


@create_shared_memory.register(UnicodeText)
def _no_shared_memory_for_text(space: UnicodeText, n: int = 1, ctx: object = multiprocessing) -> None:
    """Gymnasium's `AsyncVectorEnv` reads a `Text` observation out of shared memory once, when it is
    built, so every later observation would be the placeholder '000...'. Refuse, and say what works."""
    raise ValueError(
        "gymnasium's AsyncVectorEnv cannot keep text observations in shared memory (every observation "
        "would come back as '000...'). Use gymnasium.make_vec(id, num_envs=N) without vectorization_mode "
        "(a ConcurrentVectorEnv; add backend='process' for subprocesses), or "
        "vectorization_mode='async' with vector_kwargs={'shared_memory': False}."
    )


def list_envs() -> list[str]:
    """The ids of every gymenvs environment, for `gymnasium.make`."""
    return [entry.id for entry in ENVS]


def describe_envs() -> dict[str, str]:
    """Each env id with its one-line description."""
    return {entry.id: entry.description for entry in ENVS}


@dataclass(frozen=True)
class ProbedEnv:
    """What one env built from an id and kwargs shows: its class, turn limit and tool schemas."""

    env_class: type[gym.Env]
    max_turns: int | None
    #: `TextEnv.tool_schemas()`; empty for an env that is no `TextEnv`.
    tools: list[dict[str, Any]]


def probe(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> ProbedEnv:
    """Build one env of `env_id` with `env_kwargs` and close it: a `ValueError` now, for an unknown id,
    rather than at the first training step; the env's own error for bad kwargs."""
    from gymenvs.core.env import TextEnv

    env = gym.make(find_spec(env_id), **(env_kwargs or {}))
    try:
        unwrapped = env.unwrapped
        tools = unwrapped.tool_schemas() if isinstance(unwrapped, TextEnv) else []
        return ProbedEnv(type(unwrapped), getattr(unwrapped, "max_turns", None), tools)
    finally:
        env.close()
