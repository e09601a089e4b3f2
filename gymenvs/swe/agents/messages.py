"""Chat-completions payloads: the policy's reply as a response, an agent's request as an observation."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_function_tool_call import Function

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]

# A run of letters, digits or underscores, or any other single non-space character: see `count_text_pieces`.
_TEXT_PIECE = re.compile(r"\w+|[^\w\s]")


def chat_completion(*, model: str, content: str | None,
                    tool_calls: Sequence[ChatCompletionMessageFunctionToolCall | Mapping[str, Any]] = (),
                    request: Mapping[str, Any] | None = None, usage: CompletionUsage | Mapping[str, int] | None = None,
                    finish_reason: FinishReason | None = None) -> dict[str, Any]:
    """An OpenAI chat-completions response holding one assistant message, as the JSON-ready dict the agent receives.

    `usage` is the policy's own token counts, when it has them. Without it the usage is counted
    with `count_text_pieces`: `prompt_tokens` over `request`'s messages (0 when no request is
    given), `completion_tokens` over the reply. Those are text pieces, not a model's tokens.
    """
    calls = [ChatCompletionMessageFunctionToolCall.model_validate(call) for call in tool_calls]
    message = ChatCompletionMessage(role="assistant", content=content)
    if calls:  # set only when there are some: an unset field stays out of the JSON
        message.tool_calls = list(calls)
    completion = ChatCompletion(
        id=f"chatcmpl-{uuid.uuid4().hex}", object="chat.completion", created=int(time.time()), model=model,
        choices=[Choice(index=0, message=message, finish_reason=finish_reason or ("tool_calls" if calls else "stop"))],
        usage=CompletionUsage.model_validate(usage) if usage is not None else counted_usage(request, message),
    )
    return completion.model_dump(mode="json", exclude_unset=True)


def tool_call(name: str, arguments: dict[str, Any]) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall(id=f"call_{uuid.uuid4().hex[:24]}", type="function",
                                                 function=Function(name=name, arguments=json.dumps(arguments)))


def counted_usage(request: Mapping[str, Any] | None, reply: ChatCompletionMessage) -> CompletionUsage:
    """Usage counted in text pieces (`count_text_pieces`): the request's messages as `render` writes them
    (with their `[role]` headers), and the reply's content and tool calls (names and arguments)."""
    prompt = count_text_pieces(render(request.get("messages") or [])) if request is not None else 0
    calls = [f"{call.function.name} {call.function.arguments}" for call in reply.tool_calls or () if call.type == "function"]
    completion = count_text_pieces(" ".join([reply.content or "", *calls]))
    return CompletionUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def count_text_pieces(text: str) -> int:
    """How many text pieces `text` has: runs of letters, digits or underscores, and other non-space characters.

    A stand-in for token counts where the policy gives none and no tokenizer is at hand: it grows
    with the text as token counts do, but it is not any model's token count.
    """
    return sum(1 for _ in _TEXT_PIECE.finditer(text))


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
            tagged = json.dumps({"name": function.get("name"), "arguments": function.get("arguments")})
            body += f"\n<tool_call>{tagged}</tool_call>"
        blocks.append(f"{header}\n{body.strip()}")
    return "\n\n".join(blocks)
