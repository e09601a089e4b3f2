"""Echo: the agent's message comes back. The reference env for tests and benchmarks."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt

from gymenvs.core import Outcome, TextEnv, ToolCall, tool, validate_config


class EchoEnv(TextEnv):
    """Echo-v0. Free text is the message. Each episode lasts `max_turns` turns (truncated at the end).

    Args:
        reward: reward for every echoed message.
        length_reward: extra reward per character of the message.
        step_sleep_s: seconds each step sleeps, to stand in for I/O (a container, a tool, a network call).
        step_cpu_work: rounds of SHA-256 hashing each step does, to stand in for CPU-bound work.
        max_turns: turns per episode.
        render_mode: None or "ansi".
    """

    default_max_turns = 8

    @validate_config
    def __init__(
        self,
        *,
        reward: float = 1.0,
        length_reward: float = 0.0,
        step_sleep_s: NonNegativeFloat = 0.0,
        step_cpu_work: NonNegativeInt = 0,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.reward = reward
        self.length_reward = length_reward
        self.step_sleep_s = step_sleep_s
        self.step_cpu_work = step_cpu_work
        self._messages: list[str] = []

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._messages = []
        return "Send any message with the echo tool (or as plain text); it will be echoed back."

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("echo", {"message": text})

    @tool
    def echo(self, message: str) -> Outcome:
        """Echo a message back.

        Args:
            message: The text to echo.
        """
        if self.step_sleep_s or self.step_cpu_work:
            self._simulate_step_cost(message)
        self._messages.append(message)
        return Outcome(message, self.reward + self.length_reward * len(message))  # positional: no keyword dict to build

    def _simulate_step_cost(self, message: str) -> None:
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)
        digest = message.encode("utf-8", "replace")
        for _ in range(self.step_cpu_work):
            digest = hashlib.sha256(digest).digest()

    def _episode_state(self) -> dict[str, Any]:
        return {"messages": list(self._messages)}
