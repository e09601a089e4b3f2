"""OpenAI Responses (`POST /v1/responses`): input items to the internal form, the reply as output items.

- `instructions` and system/developer messages become system messages.
- Consecutive assistant-side items (reasoning, an assistant message, function calls) are one
  assistant message; `function_call_output` items are tool messages.
- `previous_response_id` is served from the episode's own history (`conversations`, which the env
  fills with `remember`), whether or not the client asked to `store`.
- Function tools become function schemas; a `custom` tool (free-text input, such as Codex's
  `apply_patch`) becomes a function with one string argument, `input`, and its calls go back as
  `custom_tool_call` items. Hosted tools (web search, file search, namespaces...) cannot be served
  by the policy and are left out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from gymenvs.container.agent.wire.common import Reply, WireError, arguments_object, function_tool, json_object, new_id, text_parts
from gymenvs.container.agent.wire.sse import typed_events

NAME = "responses"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")
_ASSISTANT_ITEMS = frozenset({"function_call", "custom_tool_call", "reasoning"})


def request(body: Any, conversations: Mapping[str, list] | None = None) -> dict[str, Any]:
    body = json_object(body)
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    previous = body.get("previous_response_id")
    if previous is not None:
        if previous not in (conversations or {}):
            raise WireError(f"previous_response_id {previous!r} is not a response of this episode")
        messages.extend((conversations or {})[previous])
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not (items or messages):
        raise WireError('"input" must be a string or a non-empty list of items')
    messages.extend(_messages(items))
    if not messages:
        raise WireError('"input" holds no message')
    internal: dict[str, Any] = {"model": body.get("model"), "messages": messages, "tools": _tools(body.get("tools")),
                                "stream": bool(body.get("stream"))}
    for key in ("temperature", "top_p", "parallel_tool_calls"):
        if body.get(key) is not None:
            internal[key] = body[key]
    if body.get("max_output_tokens") is not None:
        internal["max_tokens"] = body["max_output_tokens"]
    if body.get("tool_choice") is not None:
        internal["tool_choice"] = _tool_choice(body["tool_choice"])
    return internal


def remember(conversations: MutableMapping[str, list], payload: Mapping[str, Any], request: Mapping[str, Any],
             raw: Mapping[str, Any], reply_message: dict[str, Any]) -> None:
    """Keep the conversation behind response `payload` for a later `previous_response_id` (its instructions
    are the request's own, not carried over, as the API does)."""
    skip = 1 if isinstance(raw.get("instructions"), str) and raw["instructions"] else 0
    conversations[payload["id"]] = [*request["messages"][skip:], reply_message]


def _messages(items: list[Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant message the assistant-side items go into
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise WireError(f"input item {index} must be an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        what = f"input item {index} ({kind})"
        if kind == "message" and item.get("role") == "assistant":
            text = text_parts(item.get("content"), what, _TEXT_PARTS)
            if turn is None or turn.get("tool_calls") or turn["content"]:
                turn = {"role": "assistant", "content": None}
                messages.append(turn)
            turn["content"] = text
        elif kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise WireError(f"{what}: role must be user, system, developer or assistant, not {role!r}")
            text = text_parts(item.get("content"), what, _TEXT_PARTS)
            messages.append({"role": "user" if role == "user" else "system", "content": text})
            turn = None
        elif kind in _ASSISTANT_ITEMS:
            if turn is None or (kind == "reasoning" and (turn.get("tool_calls") or turn["content"])):
                turn = {"role": "assistant", "content": None}
                messages.append(turn)
            _add_to_turn(turn, item, what)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if not isinstance(item.get("call_id"), str):
                raise WireError(f'{what}: a "call_id" (a string) is required')
            output = text_parts(item.get("output"), what, _TEXT_PARTS, lenient=True)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
            turn = None
        else:
            raise WireError(f"{what}: unsupported input item type {kind!r} (supported: message, function_call, "
                            "function_call_output, custom_tool_call, custom_tool_call_output, reasoning)")
    return messages


def _add_to_turn(turn: dict[str, Any], item: dict[str, Any], what: str) -> None:
    if item["type"] == "reasoning":
        parts = item.get("content") or item.get("summary") or []
        text = text_parts(parts, what, _TEXT_PARTS) or (item.get("encrypted_content") or "")
        turn["reasoning_content"] = (turn.get("reasoning_content", "") + text) if text else turn.get("reasoning_content", "")
        return
    name, call_id = item.get("name"), item.get("call_id")
    if not isinstance(name, str) or not isinstance(call_id, str):
        raise WireError(f'{what}: "name" and "call_id" (strings) are required')
    given = item.get("arguments")
    if item["type"] == "custom_tool_call":
        arguments = json.dumps({"input": item.get("input", "")})
    else:
        arguments = given if isinstance(given, str) else json.dumps(given or {})
    function = {"name": name, "arguments": arguments}
    turn.setdefault("tool_calls", []).append({"id": call_id, "type": "function", "function": function})


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise WireError('"tools" must be a list of objects')
    schemas = []
    for tool in tools:
        if tool.get("type") == "function":
            schemas.append(function_tool(tool.get("name"), tool.get("description"), tool.get("parameters")))
        elif tool.get("type") == "custom":
            parameters = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
            schemas.append(function_tool(tool.get("name"), tool.get("description"), parameters))
    return schemas


def _custom_tools(raw: Mapping[str, Any]) -> set[Any]:
    return {tool.get("name") for tool in raw.get("tools") or () if isinstance(tool, dict) and tool.get("type") == "custom"}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def response(reply: Reply, request: Mapping[str, Any], model: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """A completed `response` whose output items are the reply's reasoning, text and tool calls."""
    reply.counted(request)
    output: list[dict[str, Any]] = []
    if reply.reasoning:
        reasoning: dict[str, Any] = {"id": new_id("rs_"), "type": "reasoning", "summary": [],
                                     "content": [{"type": "reasoning_text", "text": reply.reasoning}], "status": "completed"}
        if "reasoning.encrypted_content" in (raw.get("include") or ()):
            reasoning["encrypted_content"] = reply.reasoning  # opaque to the client; it comes back as it went
        output.append(reasoning)
    if reply.content or not (reply.tool_calls or reply.reasoning):  # an empty reply is still an (empty) message
        output.append({"id": new_id("msg_"), "type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": reply.content, "annotations": [], "logprobs": []}]})
    custom = _custom_tools(raw)
    for call in reply.tool_calls:
        if call.name in custom:
            output.append({"id": new_id("ctc_"), "type": "custom_tool_call", "status": "completed", "call_id": call.id,
                           "name": call.name, "input": str(arguments_object(call.arguments).get("input", call.arguments))})
        else:
            output.append({"id": new_id("fc_"), "type": "function_call", "status": "completed", "call_id": call.id,
                           "name": call.name, "arguments": call.arguments})
    incomplete = reply.finish == "length"
    return {
        "id": new_id("resp_", 32), "object": "response", "created_at": time.time(), "model": model,
        "status": "incomplete" if incomplete else "completed", "output": output, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": raw.get("instructions") if isinstance(raw.get("instructions"), str) else None,
        "tools": [], "tool_choice": raw.get("tool_choice") if raw.get("tool_choice") in ("auto", "none", "required") else "auto",
        "parallel_tool_calls": bool(raw.get("parallel_tool_calls", True)),
        "previous_response_id": raw.get("previous_response_id"), "store": bool(raw.get("store", False)),
        "max_output_tokens": raw.get("max_output_tokens"), "temperature": raw.get("temperature"), "top_p": raw.get("top_p"),
        "metadata": {}, "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens": reply.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


def stream(payload: Mapping[str, Any], request: Mapping[str, Any]) -> bytes:
    """The response as the documented event sequence: created, in_progress, each output item (added, its
    deltas and dones, done), then completed (or incomplete); `sequence_number` counts from 0."""
    return typed_events({**event, "sequence_number": number} for number, event in enumerate(stream_events(payload)))


def stream_events(payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    opening = {**payload, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    yield {"type": "response.created", "response": opening}
    yield {"type": "response.in_progress", "response": opening}
    for index, item in enumerate(payload["output"]):
        yield from _item_events(index, item)
    yield {"type": "response.incomplete" if payload["status"] == "incomplete" else "response.completed", "response": payload}


def _item_events(index: int, item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    at = {"output_index": index, "item_id": item["id"]}
    kind = item["type"]
    if kind == "message":
        yield _added(index, item, content=[])
        for number, part in enumerate(item["content"]):
            yield {"type": "response.content_part.added", **at, "content_index": number, "part": {**part, "text": ""}}
            yield {"type": "response.output_text.delta", **at, "content_index": number, "delta": part["text"], "logprobs": []}
            yield {"type": "response.output_text.done", **at, "content_index": number, "text": part["text"], "logprobs": []}
            yield {"type": "response.content_part.done", **at, "content_index": number, "part": part}
    elif kind == "function_call":
        yield _added(index, item, arguments="")
        yield {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]}
        yield {"type": "response.function_call_arguments.done", **at, "name": item["name"], "arguments": item["arguments"]}
    elif kind == "custom_tool_call":
        yield _added(index, item, input="")
        yield {"type": "response.custom_tool_call_input.delta", **at, "delta": item["input"]}
        yield {"type": "response.custom_tool_call_input.done", **at, "input": item["input"]}
    else:  # reasoning
        yield _added(index, item, content=[])
        for number, part in enumerate(item.get("content") or []):
            yield {"type": "response.reasoning_text.delta", **at, "content_index": number, "delta": part["text"]}
            yield {"type": "response.reasoning_text.done", **at, "content_index": number, "text": part["text"]}
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def _added(index: int, item: dict[str, Any], **empty: Any) -> dict[str, Any]:
    """`response.output_item.added`: the item in progress, its body still empty."""
    return {"type": "response.output_item.added", "output_index": index, "item": {**item, "status": "in_progress", **empty}}


def error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
