"""Policies `gymenvs eval` can run: scripted players, random tool calls, an OpenAI-compatible endpoint, a local
transformers model.

A policy sees what a model would see, the conversation so far and the env's tool schemas, and
returns an action: free text, or a tool call as `{"name": ..., "arguments": {...}}`. It never
reads the env's hidden state. `make_policy(kind, env_id, ...)` builds one by name, or your own from
`module:name` (a function of the messages and tools, or a `Policy` class or object: `load_policy`). The `openai` and
`transformers` libraries are imported only when their policy is built.
"""

from __future__ import annotations

from typing import Any

from gymenvs.eval.policies.base import Action, Messages, Policy, as_text
from gymenvs.eval.policies.imported import FunctionPolicy, load_policy
from gymenvs.eval.policies.openai import OpenAIPolicy
from gymenvs.eval.policies.random_calls import RandomPolicy
from gymenvs.eval.policies.scripted import SCRIPTED, CatchPlayer, EchoPlayer, WordlePlayer
from gymenvs.eval.policies.transformers import TransformersPolicy

__all__ = [
    "SCRIPTED",
    "Action",
    "CatchPlayer",
    "EchoPlayer",
    "FunctionPolicy",
    "Messages",
    "OpenAIPolicy",
    "Policy",
    "RandomPolicy",
    "TransformersPolicy",
    "WordlePlayer",
    "as_text",
    "load_policy",
    "make_policy",
]


def make_policy(kind: str, env_id: str, **options: Any) -> Policy:
    """A policy by name: `scripted` (for the envs in `SCRIPTED`), `random` (random tool calls), `openai` (`base_url`,
    `model`, ...), `transformers` (`model`, ...), or `module:name` for your own (`load_policy`)."""
    if ":" in kind:
        return load_policy(kind)
    if kind == "scripted":
        if env_id not in SCRIPTED:
            raise ValueError(f"no scripted policy for {env_id!r}; there are scripted policies for {sorted(SCRIPTED)}, "
                             "and --policy random plays any env with tools")
        return SCRIPTED[env_id]()
    if kind == "random":
        return RandomPolicy(**options)
    if kind == "openai":
        return OpenAIPolicy(**options)
    if kind == "transformers":
        return TransformersPolicy(**options)
    raise ValueError(f"policy {kind!r}: expected one of scripted, random, openai, transformers, or module:name for your own")
