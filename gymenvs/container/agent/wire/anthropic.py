"""Anthropic Messages (`POST /v1/messages`, also `?beta=true`; `POST /v1/messages/count_tokens`).

- `system` (a string or text blocks) becomes the first system message; a `role: "system"` message in
  `messages` (Claude Code sends one) stays a system message.
- A user message's `tool_result` blocks become tool messages, its text (and placeholders for images
  and documents) a user message; an assistant message's text, `thinking` and `tool_use` blocks one
  assistant message (`content`, `reasoning_content`, `tool_calls`). `cache_control`, signatures and
  `redacted_thinking` carry nothing the policy reads and are dropped.
- Tools with an `input_schema` become function schemas; Anthropic's server tools (typed, such as
  web search) cannot be served by the policy and are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from gymenvs.container.agent.messages import count_rendered_pieces, count_text_pieces
from gymenvs.container.agent.wire.common import Reply, WireError, arguments_object, function_tool, json_object, new_id, text_parts
from gymenvs.container.agent.wire.sse import typed_events

NAME = "anthropic"
_TEXT = ("text",)
_SKIPPED_ASSISTANT_BLOCKS = frozenset({"redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result"})
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def request(body: Any, conversations: Mapping[str, list] | None = None) -> dict[str, Any]:
    body = json_object(body)
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise WireError('"messages" must be a non-empty list')
    messages: list[dict[str, Any]] = []
    system = text_parts(body.get("system"), "system", _TEXT)
    if system:
        messages.append({"role": "system", "content": system})
    for index, message in enumerate(raw_messages):
        if not isinstance(message, dict):
            raise WireError(f"message {index} must be an object")
        messages.extend(_convert(message, f"message {index}"))
    internal: dict[str, Any] = {"model": body.get("model"), "messages": messages, "tools": _tools(body.get("tools")),
                                "stream": bool(body.get("stream"))}
    for key in ("max_tokens", "temperature", "top_p"):
        if body.get(key) is not None:
            internal[key] = body[key]
    if body.get("stop_sequences"):
        internal["stop"] = body["stop_sequences"]
    internal.update(_tool_choice(body.get("tool_choice")))
    return internal


def _convert(message: dict[str, Any], what: str) -> list[dict[str, Any]]:
    role, content = message.get("role"), message.get("content")
    if role == "system":
        return [{"role": "system", "content": text_parts(content, what, _TEXT)}]
    if role == "assistant":
        return [_assistant(content, what)]
    if role != "user":
        raise WireError(f"{what}: role must be user or assistant, not {role!r}")
    if not isinstance(content, list):
        return [{"role": "user", "content": text_parts(content, what, _TEXT)}]
    converted: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise WireError(f'{what}: a tool_result needs a "tool_use_id" (a string)')
            converted.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                              "content": text_parts(block.get("content"), f"{what} tool_result", _TEXT, lenient=True)})
        else:
            texts.append(block)
    if texts:
        converted.append({"role": "user", "content": text_parts(texts, what, _TEXT)})
    return converted


def _assistant(content: Any, what: str) -> dict[str, Any]:
    if not isinstance(content, list):
        return {"role": "assistant", "content": text_parts(content, what, _TEXT)}
    message: dict[str, Any] = {"role": "assistant", "content": None}
    texts, calls, thinking = [], [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise WireError(f'{what}: a tool_use needs an "id" and a "name" (strings)')
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
        elif kind not in _SKIPPED_ASSISTANT_BLOCKS:
            raise WireError(f"{what}: unsupported assistant content block {kind!r} (supported: text, thinking, tool_use)")
    if texts:
        message["content"] = "".join(texts)
    if any(thinking):
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise WireError('"tools" must be a list of objects')
    return [function_tool(tool.get("name"), tool.get("description"), tool.get("input_schema"))
            for tool in tools if tool.get("type") in (None, "custom") and "input_schema" in tool]


def _tool_choice(choice: Any) -> dict[str, Any]:
    if not isinstance(choice, dict):
        return {}
    kind = choice.get("type")
    chosen: dict[str, Any] = {}
    if kind in ("auto", "none"):
        chosen["tool_choice"] = kind
    elif kind == "any":
        chosen["tool_choice"] = "required"
    elif kind == "tool":
        chosen["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    if choice.get("disable_parallel_tool_use"):
        chosen["parallel_tool_calls"] = False
    return chosen


def response(reply: Reply, request: Mapping[str, Any], model: str, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A `message` whose content blocks are the reply's thinking, text and tool uses."""
    reply.counted(request)
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": new_id("gymenvs-", 32)})
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for call in reply.tool_calls:
        call.id = new_id("toolu_")  # the ids Anthropic clients expect; the recorded reply carries the same
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(call.arguments)})
    if not content:  # an empty reply is still one (empty) text block, as the API gives
        content.append({"type": "text", "text": ""})
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": _STOP_REASONS[reply.finish], "stop_sequence": None,
            "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def remember(conversations: MutableMapping[str, list], payload: Mapping[str, Any], request: Mapping[str, Any],
             raw: Mapping[str, Any], reply_message: dict[str, Any]) -> None:
    """Nothing to keep: a Messages client sends its whole history."""


def count_tokens(request: Mapping[str, Any]) -> dict[str, Any]:
    """`/v1/messages/count_tokens`'s answer, counted in text pieces (`messages.count_text_pieces`)."""
    tools = json.dumps(request.get("tools") or []) if request.get("tools") else ""
    return {"input_tokens": count_rendered_pieces(request["messages"]) + count_text_pieces(tools)}


def stream(payload: Mapping[str, Any], request: Mapping[str, Any]) -> bytes:
    """The message as the documented event sequence: message_start, each block (start, deltas, stop),
    message_delta (stop reason, output tokens), message_stop."""
    return typed_events(stream_events(payload))


def stream_events(payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    usage = payload["usage"]
    opening = {**payload, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield {"type": "message_start", "message": opening}
    for index, block in enumerate(payload["content"]):
        yield from _block_events(index, block)
    yield {"type": "message_delta", "delta": {"stop_reason": payload["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": usage["output_tokens"]}}
    yield {"type": "message_stop"}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block["type"]

    def start(content_block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": content_block}

    def delta(**fields: Any) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    if kind == "thinking":
        yield start({"type": "thinking", "thinking": "", "signature": ""})
        yield delta(type="thinking_delta", thinking=block["thinking"])
        yield delta(type="signature_delta", signature=block["signature"])
    elif kind == "text":
        yield start({"type": "text", "text": ""})
        yield delta(type="text_delta", text=block["text"])
    else:  # tool_use
        yield start({**block, "input": {}})
        yield delta(type="input_json_delta", partial_json=json.dumps(block["input"]))
    yield {"type": "content_block_stop", "index": index}


def models(model: str) -> dict[str, Any]:
    """`GET /v1/models` as an Anthropic client reads it."""
    entry = {"type": "model", "id": model, "display_name": model, "created_at": "1970-01-01T00:00:00Z"}
    return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}


def error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
