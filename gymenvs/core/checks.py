"""`check_env`: gymnasium's env checker, plus what a model is shown about the env's tools."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.utils import env_checker

from gymenvs.core.env import TextEnv
from gymenvs.core.tools import function_schema, tool_schemas


def check_env(env: gym.Env, *, skip_render_check: bool = False) -> None:
    """Run gymnasium's checker on the env, then check that a `TextEnv` shows the one tool schema
    (`function_schema` of each tool, in name order) in `tool_schemas()` and in reset's `info["tools"]`:
    what `make_rollout_func` renders and what TRL's `environment_factory` derives. `AssertionError` otherwise."""
    unwrapped = env.unwrapped
    env_checker.check_env(unwrapped, skip_render_check=skip_render_check)
    if not isinstance(unwrapped, TextEnv):
        return
    expected = [function_schema(getattr(type(unwrapped), name)) for name in sorted(type(unwrapped).tools)]
    assert tool_schemas(type(unwrapped).tools) == expected, f"{type(unwrapped).__name__}.tools hold other schemas than @tool made"
    assert unwrapped.tool_schemas() == expected, _differs("tool_schemas()", unwrapped.tool_schemas(), expected)
    _, info = unwrapped.reset(seed=0)
    assert info.get("tools") == expected, _differs('reset\'s info["tools"]', info.get("tools"), expected)


def _differs(where: str, shown: Any, expected: Any) -> str:
    return f"{where} shows a model {shown!r}, not the tools' schemas {expected!r}"
