"""Your own policy for `gymenvs eval --policy module:name`: a function, a `Policy` class, or a `Policy` object.

`name` in `module` may be
- a function `(messages, tools) -> action` (free text, or `{"name": ..., "arguments": {...}}`), called every turn;
- a class whose instances are `Policy`s (`act`, `new_episode`; see `gymenvs.eval.policies.base`), built with no arguments;
- a `Policy` object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from gymenvs.eval.policies.base import Action, Messages, Policy


class FunctionPolicy:
    """A stateless policy from a function of the conversation so far and the env's tools."""

    def __init__(self, function: Callable[[Messages, Sequence[dict[str, Any]]], Action], name: str):
        self.function = function
        self.name = name

    def new_episode(self) -> FunctionPolicy:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        return self.function(messages, tools)


def load_policy(reference: str) -> Policy:
    """The policy `reference` ("module:name") names; a `ValueError` when it cannot be found or is no policy."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--policy {reference!r}: expected scripted, random, openai, transformers or module:name")
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"--policy {reference!r}: cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ValueError(f"--policy {reference!r}: {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if isinstance(found, type):
        found = found()
    if callable(getattr(found, "act", None)) and callable(getattr(found, "new_episode", None)):
        return found
    if callable(found):
        return FunctionPolicy(found, reference)
    raise ValueError(
        f"--policy {reference!r}: {type(found).__name__} is no policy; expected a function (messages, tools) -> action, "
        "or a class or object with act() and new_episode()"
    )
