"""An agent's chat messages as text: the observation an agent env shows, and a length counted in text pieces."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gymenvs.core.actions import ActionError, render_tool_call

# A run of letters, digits or underscores, or any other single non-space character: see `count_text_pieces`.
_TEXT_PIECE = re.compile(r"\w+|[^\w\s]")


def count_text_pieces(text: str) -> int:
    """How many text pieces `text` has: runs of letters, digits or underscores, and other non-space characters.

    A stand-in for token counts where the policy gives none and no tokenizer is at hand: it grows
    with the text as token counts do, but it is not any model's token count.
    """
    return len(_TEXT_PIECE.findall(text))


def text_of(content: Any) -> str:
    """A message's content as text (OpenAI allows a string, null, or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def render(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as plain text, one block per message; an assistant's tool calls as Qwen 2.5's chat template
    writes them (`gymenvs.core.actions.render_tool_call`)."""
    return "\n\n".join(_block(message) for message in messages)


def count_rendered_pieces(messages: Sequence[dict[str, Any]]) -> int:
    """`count_text_pieces(render(messages))`, each message's count remembered: an agent sends its whole history at
    every call, and counting it again each time made a long episode's every call cost tens of ms (the count of
    blocks joined by blank lines is the sum of theirs, as no piece spans whitespace)."""
    return sum(_block_pieces(_block(message)) for message in messages)


class PromptPieces:
    """`count_rendered_pieces` of one episode's successive requests. An agent resends its whole history at every
    call: the messages up to where a request first differs from the one before are not counted again (comparing
    them costs a small part of rendering them), and the rest go through the per-block memo."""

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._counts: list[int] = []

    def count(self, messages: Sequence[dict[str, Any]]) -> int:
        same = 0
        for before, now in zip(self._messages, messages):
            if before != now:
                break
            same += 1
        self._counts = self._counts[:same] + [_block_pieces(_block(message)) for message in messages[same:]]
        self._messages = list(messages)
        return sum(self._counts)


_BLOCK_COUNTS: dict[bytes, int] = {}  # text pieces by a digest of the block: bounded, cleared when full
_BLOCK_COUNTS_MAX = 1 << 16


def _block_pieces(block: str) -> int:
    key = hashlib.blake2b(block.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    count = _BLOCK_COUNTS.get(key)
    if count is None:
        if len(_BLOCK_COUNTS) >= _BLOCK_COUNTS_MAX:
            _BLOCK_COUNTS.clear()
        count = _BLOCK_COUNTS[key] = count_text_pieces(block)
    return count


def _block(message: dict[str, Any]) -> str:
    header = f"[{message.get('role', '?')}]" + (f" ({message['name']})" if message.get("name") else "")
    body = text_of(message.get("content"))
    for call in message.get("tool_calls") or []:
        body += "\n" + _tool_call_text(call.get("function") or {})
    return f"{header}\n{body.strip()}"


def _tool_call_text(function: Mapping[str, Any]) -> str:
    name, arguments = str(function.get("name") or ""), function.get("arguments")
    try:
        return render_tool_call(name, arguments)
    except ActionError:  # arguments that are no JSON object (an agent's history may hold any): kept, under "input"
        return render_tool_call(name, {"input": arguments})
