"""OpenAI Chat Completions (`POST /v1/chat/completions`): the internal form itself, streamed as chunks."""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping
from typing import Any

from gymenvs.container.agent.wire.common import Reply, WireError, json_object, new_id
from gymenvs.container.agent.wire.sse import data_events

NAME = "chat"


def request(body: Any, conversations: Mapping[str, list] | None = None) -> dict[str, Any]:
    """The request as the internal form: a chat request already is one."""
    body = json_object(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise WireError('"messages" must be a non-empty list of objects with a "role"')
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise WireError('"tools" must be a list of objects')
    return body


def response(reply: Reply, request: Mapping[str, Any], model: str, raw: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A `chat.completion` holding the reply."""
    reply.counted(request)
    usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
             "total_tokens": reply.prompt_tokens + reply.completion_tokens}
    return {"id": new_id("chatcmpl-", 32), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": reply.message(), "finish_reason": reply.finish}], "usage": usage}


def remember(conversations: MutableMapping[str, list], payload: Mapping[str, Any], request: Mapping[str, Any],
             raw: Mapping[str, Any], reply_message: dict[str, Any]) -> None:
    """Nothing to keep: a chat client sends its whole history."""


def reply_of(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The assistant message of a chat completion (the internal form of the reply), if it has one."""
    try:
        return payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None


def stream(payload: Mapping[str, Any], request: Mapping[str, Any]) -> bytes:
    """The completion as `chat.completion.chunk` events: role and content, one chunk per tool call, the finish,
    then the usage when `stream_options.include_usage` asked for it; then `[DONE]`."""
    return data_events(stream_chunks(payload, include_usage=bool((request.get("stream_options") or {}).get("include_usage"))))


def stream_chunks(completion: Mapping[str, Any], include_usage: bool = False) -> list[dict[str, Any]]:
    choice = completion["choices"][0]
    message = choice["message"]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    first: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("reasoning_content"):
        first["reasoning_content"] = message["reasoning_content"]
    chunks = [chunk(first)]
    chunks += [chunk({"tool_calls": [{"index": i, **call}]}) for i, call in enumerate(message.get("tool_calls") or [])]
    chunks.append(chunk({}, choice.get("finish_reason")))
    if include_usage and "usage" in completion:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


def error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}
