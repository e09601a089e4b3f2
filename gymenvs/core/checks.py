"""`check_env`: gymnasium's env checker, plus what a model is shown about the env's tools and its length limits."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
from gymnasium.utils import env_checker

from gymenvs.core.env import TextEnv
from gymenvs.core.images import TEXT_KEY
from gymenvs.core.spaces import UnicodeText, clip_text
from gymenvs.core.tools import function_schema, tool_schemas


def check_env(env: gym.Env, *, skip_render_check: bool = False) -> None:
    """Run gymnasium's checker on the env, then check that a `TextEnv` shows the one tool schema
    (`function_schema` of each tool, in name order) in `tool_schemas()` and in reset's `info["tools"]`:
    what `make_rollout_func` renders and what TRL's `environment_factory` derives; that it has an action
    (a tool, or free text it understands); and that its length limits agree. `AssertionError` otherwise."""
    unwrapped = env.unwrapped
    env_checker.check_env(unwrapped, skip_render_check=skip_render_check)
    if not isinstance(unwrapped, TextEnv):
        return
    check_has_actions(unwrapped)
    check_length_limits(unwrapped)
    expected = [function_schema(getattr(type(unwrapped), name)) for name in sorted(type(unwrapped).tools)]
    assert tool_schemas(type(unwrapped).tools) == expected, f"{type(unwrapped).__name__}.tools hold other schemas than @tool made"
    assert unwrapped.tool_schemas() == expected, _differs("tool_schemas()", unwrapped.tool_schemas(), expected)
    _, info = unwrapped.reset(seed=0)
    assert info.get("tools") == expected, _differs('reset\'s info["tools"]', info.get("tools"), expected)


def _differs(where: str, shown: Any, expected: Any) -> str:
    return f"{where} shows a model {shown!r}, not the tools' schemas {expected!r}"


def check_has_actions(env: TextEnv) -> None:
    """An env with no `@tool` that understands no free text (neither `_parse_text` nor `_act` overridden) rejects
    every action."""
    takes_text = type(env)._parse_text is not TextEnv._parse_text or type(env)._act is not TextEnv._act
    assert env.tools or takes_text, (
        f"{type(env).__name__} has no @tool methods and does not override _parse_text (or _act): every action would be "
        "rejected"
    )


def check_length_limits(env: TextEnv) -> None:
    """The text limits agree: observations are clipped to `max_observation_length`, so the observation space's
    text must hold that many characters, and a clipped observation (its head, a marker, its tail) must fit too."""
    limit = env.max_observation_length
    assert isinstance(limit, int) and limit > 0, f"{type(env).__name__}.max_observation_length={limit!r}: expected a positive int"
    clipped = clip_text("x" * (10 * limit + 1000), limit)
    assert len(clipped) <= limit, (
        f"{type(env).__name__}.max_observation_length={limit} is too small to hold a clipped observation "
        f"({len(clipped)} characters with the cut marker)"
    )
    space = _text_space(env.observation_space)
    if isinstance(space, UnicodeText):
        name = f"{type(env).__name__}.observation_space"
        assert space.min_length == 0, f"{name}={space}: expected min_length 0 (an observation may be empty)"
        assert space.max_length >= limit, (
            f"{name}={space} holds fewer characters than max_observation_length={limit}: "
            "clipped observations would fall outside it"
        )
    check_action_length_limits(env)


def check_action_length_limits(env: TextEnv) -> None:
    """The action space's text may be empty (the env answers an empty action with an error, as any other
    bad one) and holds a call of each tool (its JSON with no arguments, the shortest there is)."""
    space = env.action_space
    if not isinstance(space, UnicodeText):
        return
    name = f"{type(env).__name__}.action_space"
    assert space.min_length == 0, f"{name}={space}: expected min_length 0 (an action may be empty)"
    calls = [json.dumps({"name": tool_name, "arguments": {}}) for tool_name in env.tools]
    longest = max(calls, key=len, default="")
    assert space.max_length >= len(longest), (
        f"{name}={space} holds fewer characters than a call of a tool: {longest} has {len(longest)}"
    )


def _text_space(space: gym.Space) -> gym.Space:
    """The text part of a text+image observation space (`gymenvs.core.images`), else the space itself."""
    if isinstance(space, gym.spaces.Dict) and TEXT_KEY in space.spaces:
        return space.spaces[TEXT_KEY]
    return space
