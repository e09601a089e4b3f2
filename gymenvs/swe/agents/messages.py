"""Chat-completions payloads: the policy's reply as a response, an agent's request as an observation."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any


def chat_completion(*, model: str, content: str | None, tool_calls: Sequence[dict[str, Any]] = (),
                    usage: dict[str, int] | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    """An OpenAI chat-completions response holding one assistant message."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
        "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def reply_message(completion: dict[str, Any]) -> dict[str, Any] | None:
    """The assistant message of a chat-completions response, if it has one."""
    try:
        return completion["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None


def text_of(content: Any) -> str:
    """A message's content as text (OpenAI allows a string, null, or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def canonical(message: dict[str, Any]) -> tuple:
    """What a message says, without the keys clients add or drop on the way (refusal, annotations, ids...)."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass
        calls.append((function.get("name"), json.dumps(arguments, sort_keys=True)))
    return message.get("role"), text_of(message.get("content")).strip(), tuple(calls)


def extends(previous: Sequence[dict[str, Any]], reply: dict[str, Any] | None, messages: Sequence[dict[str, Any]]) -> bool:
    """Whether `messages` starts with the previous request's messages followed by the reply it got."""
    history = [*previous, *([reply] if reply is not None else [])]
    return len(messages) >= len(history) and all(canonical(a) == canonical(b) for a, b in zip(history, messages))


def render(messages: Sequence[dict[str, Any]]) -> str:
    """Messages as plain text, one block per message."""
    blocks = []
    for message in messages:
        header = f"[{message.get('role', '?')}]" + (f" ({message['name']})" if message.get("name") else "")
        body = text_of(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            body += f"\n<tool_call>{json.dumps({'name': function.get('name'), 'arguments': function.get('arguments')})}</tool_call>"
        blocks.append(f"{header}\n{body.strip()}")
    return "\n\n".join(blocks)
