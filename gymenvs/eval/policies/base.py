"""What a policy is: it reads the conversation so far and the env's tool schemas, and returns an action.

The TRL bridge's `Generator` (wrappers.trl) is the token-level counterpart: token ids in, sampled
tokens and their logprobs out, for training. A `Policy` works on messages, for evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

Action = str | dict[str, Any]
Messages = list[dict[str, Any]]


class Policy(Protocol):
    """Chooses the next action from the conversation so far. `new_episode` is called before each episode."""

    name: str

    def new_episode(self) -> Policy:
        """A policy for one episode (the same object when it keeps no per-episode state)."""
        ...

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action: ...


def as_text(action: Action) -> str:
    """An action as the assistant message that carries it."""
    return action if isinstance(action, str) else json.dumps(action)


class Conversation:
    """One episode's policy and the messages it has seen, as `gymenvs eval` and `gymenvs bench` build them: the
    env's first observation as the user's message, each action as the assistant's, each observation after it as
    the tool's answer (or the user's, after a free-text action)."""

    def __init__(self, policy: Policy, tools: Sequence[dict[str, Any]], observation: str):
        self.policy = policy
        self.tools = tools
        self.messages: Messages = [{"role": "user", "content": observation}]

    def act(self) -> Action:
        action = self.policy.act(self.messages, self.tools)
        if isinstance(action, dict) and is_assistant_message(action):
            self.messages.append(dict(action))
        else:
            self.messages.append({"role": "assistant", "content": as_text(action)})
        return action

    def observe(self, action: Action, observation: str) -> None:
        """The observation as the tool's answer to one call, else as the user's (an env takes one call a turn)."""
        if isinstance(action, dict) and is_assistant_message(action):
            answers_a_call = len(action.get("tool_calls") or []) == 1
        else:
            answers_a_call = isinstance(action, dict)
        self.messages.append({"role": "tool" if answers_a_call else "user", "content": observation})


def is_assistant_message(action: dict[str, Any]) -> bool:
    return action.get("role") == "assistant"
