"""Reading an action: a tool-call mapping, the same as JSON text, or an env's own free text.

Also the one codec of Hermes / Qwen `<tool_call>` text, used wherever gymenvs reads or writes it:
`render_tool_call` writes one call as Qwen 2.5's chat template does, `split_tool_calls` reads every
block out of a model's text, and `parse_action` reads one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

# Hermes / Qwen style, as chat templates emit tool calls: <tool_call>{"name": ..., "arguments": ...}</tool_call>.
# The block ends at the first closing tag, so JSON holding the text "</tool_call>" cannot be read (as in
# Qwen's own parsers).
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_TOOL_CALL_BLOCK = re.compile(rf"{re.escape(TOOL_CALL_OPEN)}\s*(.*?)\s*{re.escape(TOOL_CALL_CLOSE)}", re.DOTALL)


class ActionError(Exception):
    """An action the env cannot carry out. Its message is shown to the agent, so make it say how to fix it."""


@dataclass(slots=True)  # not frozen: a frozen dataclass is built through object.__setattr__, on every step
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


#: Where an assistant message holds its reasoning: models' response parsers name it differently (Qwen3, GLM and
#: DeepSeek `reasoning_content`; gpt-oss and LFM2.5 `thinking`; some servers `reasoning`).
REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


def reasoning_of(message: Mapping) -> str | None:
    """The reasoning an assistant message holds, under whichever key its parser wrote it, or None."""
    for key in REASONING_KEYS:
        if isinstance(message.get(key), str) and message[key]:
            return message[key]
    return None


def parse_action(action: Any, parse_text: Callable[[str], ToolCall]) -> ToolCall:
    """The tool call an action asks for, or `ActionError` saying why there is none.

    Accepted forms, in order: an assistant message (`{"role": "assistant", "content": ..., "tool_calls":
    [...]}`, as chat APIs and response parsers give a model's turn: its one call, else its content read as
    text); a mapping (`{"name": ..., "arguments": {...}}` or OpenAI's `{"type": "function", "function":
    {...}}`); text holding one `<tool_call>` block; text that is a JSON tool call; any other text, read by
    the env's `parse_text`.
    """
    if not isinstance(action, str):
        if isinstance(action, Mapping):
            if action.get("role") == "assistant":
                return _parse_message(action, parse_text)
            return tool_call_from_mapping(action)
        raise ActionError(f"an action is text, a tool-call mapping or an assistant message, not {type(action).__name__}")
    if "<tool_call>" in action:  # TOOL_CALL_OPEN, as a constant: this is the hot step path
        tagged = _TOOL_CALL_BLOCK.findall(action)
        if len(tagged) > 1:
            raise ActionError(f"one tool call per turn, got {len(tagged)} <tool_call> blocks")
        if tagged:
            return tool_call_from_mapping(_decode_json_object(tagged[0]), decoded=True)
    stripped = action.strip()
    if stripped[:1] == "{" and stripped[-1:] == "}":
        try:
            decoded = _decode_json_object(stripped)
        except ActionError as json_error:
            return _parse_free_text(action, parse_text, json_error)
        if "name" in decoded or "function" in decoded:
            return tool_call_from_mapping(decoded, decoded=True)
    return parse_text(action)


def tool_names(message: Mapping) -> list[str]:
    """The names of the tools an assistant message calls, in order (OpenAI's `{"function": {...}}` calls or bare ones)."""
    return [str((call.get("function") or call).get("name")) for call in message.get("tool_calls") or []]


def _parse_message(message: Mapping, parse_text: Callable[[str], ToolCall]) -> ToolCall:
    calls = message.get("tool_calls") or []
    if len(calls) > 1:
        raise ActionError(f"one tool call per turn, got {len(calls)} ({', '.join(tool_names(message))}): "
                          "call one tool, then the next")
    if calls:
        return tool_call_from_mapping(calls[0])
    content = message.get("content") or ""
    if not isinstance(content, str):
        raise ActionError(f"an assistant message's content is text, not {type(content).__name__}")
    return parse_action(content, parse_text)


def split_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """The text outside its `<tool_call>` blocks (surrounding whitespace stripped), and the calls the
    blocks hold, in order; `ActionError` for a block that is no tool call (malformed JSON, say).

    Text without a block is returned stripped, with no calls: whether it is an action anyway (JSON
    text, free text) is the caller's to decide.
    """
    blocks = _TOOL_CALL_BLOCK.findall(text) if TOOL_CALL_OPEN in text else []
    if not blocks:
        return text.strip(), []
    calls = [tool_call_from_mapping(_decode_json_object(block), decoded=True) for block in blocks]
    return _TOOL_CALL_BLOCK.sub("", text).strip(), calls


def render_tool_call(name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
    """One tool call as Qwen 2.5's chat template writes it (and TRL's response parser reads it):
    `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, the arguments an object.

    `arguments` is a mapping, or JSON text of one (as OpenAI messages hold them): other text is an
    `ActionError`. The template writes the name unescaped; here it is JSON-escaped, the same text for
    any name without quotes, backslashes or control characters, and still valid JSON for one with them.
    """
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):
        arguments = _decode_json_object(arguments) if arguments.strip() else {}
    elif not _is_mapping(arguments):
        raise ActionError(f'the "arguments" of tool call {name!r} must be an object, not {type(arguments).__name__}')
    # json.dumps as the template's `tojson` filter calls it (transformers: ensure_ascii=False)
    call = f'{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {json.dumps(dict(arguments), ensure_ascii=False)}}}'
    return f"{TOOL_CALL_OPEN}\n{call}\n{TOOL_CALL_CLOSE}"


def tool_call_from_mapping(mapping: Mapping, *, decoded: bool = False) -> ToolCall:
    """The tool call a mapping asks for. `decoded`: the mapping was just decoded from JSON text and is nobody
    else's, so its arguments dict becomes the call's own instead of a copy."""
    function = mapping.get("function")
    if function is not None and _is_mapping(function):
        mapping = function
    name = mapping.get("name")
    if not isinstance(name, str) or not name:
        raise ActionError('a tool call needs a "name" (a string) and "arguments" (an object)')
    arguments = mapping.get("arguments")
    if type(arguments) is dict:  # the common case, ahead of the checks below
        return ToolCall(name, arguments if decoded else arguments.copy())
    if isinstance(arguments, str):
        arguments = _decode_json_object(arguments) if arguments.strip() else {}
    if arguments is None:
        arguments = {}
    if not _is_mapping(arguments):
        raise ActionError(f'the "arguments" of tool call {name!r} must be an object, not {type(arguments).__name__}')
    return ToolCall(name, dict(arguments))


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # the exact-type test spares an ABC check


def _decode_json_object(text: str) -> dict[str, Any]:
    """The JSON object `text` holds (surrounding whitespace allowed), or `ActionError` saying why not."""
    try:  # the fast path: pydantic's JSON parser (jiter), about half the cost of `json.loads` on a tool call
        value = pydantic_core.from_json(text)
        if type(value) is dict:
            return value
    except (ValueError, TypeError):  # refused (TypeError: text with a lone surrogate): json.loads may still read it
        pass
    try:  # anything else: json.loads, for its exact result or error message
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, or an integer of over 4,300 digits
        raise ActionError(f"malformed JSON in tool call: {exc}") from None
    if not isinstance(value, dict):
        raise ActionError(f"a JSON tool call must be an object, not {type(value).__name__}")
    return value


def _parse_free_text(text: str, parse_text: Callable[[str], ToolCall], json_error: ActionError) -> ToolCall:
    """Text that looked like JSON but was not: the env may still read it (an answer like `{1, 2}`)."""
    try:
        return parse_text(text)
    except ActionError as text_error:
        raise ActionError(f"{json_error}; read as free text instead: {text_error}") from None
