"""A policy for `gymenvs eval --policy guess_number.policy:bisect`: a function from the conversation so far
(and the env's tool schemas) to the next action. It keeps no state between calls: it reads the range off
the messages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def bisect(messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Guess the middle of the range the feedback so far leaves."""
    low, high = 1, int(re.search(r"from 1 to (\d+)", messages[0]["content"]).group(1))  # type: ignore[union-attr]
    for message in messages[1:]:
        told = re.match(r"(\d+): (higher|lower)", message["content"])
        if message["role"] != "assistant" and told:
            number = int(told.group(1))
            low, high = (number + 1, high) if told.group(2) == "higher" else (low, number - 1)
    return {"name": "guess", "arguments": {"number": (low + high) // 2}}
