"""What the three wire formats share: the policy's reply in one form, the errors, ids and token counts.

The internal request is a plain dict in OpenAI chat-completions form: `model`, `messages` (roles
system, user, assistant, tool; an assistant's reasoning in `reasoning_content`), `tools` (function
schemas, `{"type": "function", "function": {...}}`), `stream` and the sampling parameters the agent
gave (`max_tokens`, `temperature`, `top_p`, `stop`, `tool_choice`, `parallel_tool_calls`).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gymenvs.container.agent.messages import count_rendered_pieces, count_text_pieces
from gymenvs.core.actions import ActionError, ToolCall, reasoning_of, split_tool_calls, tool_call_from_mapping

FinishReason = Literal["stop", "tool_calls", "length"]
SAMPLING_KEYS = ("max_tokens", "temperature", "top_p", "stop", "tool_choice", "parallel_tool_calls")

_THINK = re.compile(r"^\s*(?:<think>)?(.*?)</think>", re.DOTALL)


class WireError(ValueError):
    """A request this channel cannot take (malformed, or asking for what is not supported); ends the episode."""


def new_id(prefix: str, length: int = 24) -> str:
    """`prefix` and `length` random hex digits."""
    return prefix + secrets.token_hex((length + 1) // 2)[:length]


@dataclass(slots=True)
class ReplyCall:
    name: str
    arguments: str
    """The arguments as JSON text."""
    id: str = field(default_factory=lambda: new_id("call_"))


@dataclass(slots=True)
class Reply:
    """The policy's reply, whatever the agent's format: text, tool calls (several: parallel tool use) and
    reasoning; `prompt_tokens`/`completion_tokens` as the agent is told them."""

    content: str | None = None
    tool_calls: list[ReplyCall] = field(default_factory=list)
    reasoning: str | None = None
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def finish(self) -> FinishReason:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def message(self) -> dict[str, Any]:
        """The reply as an assistant message of the internal form."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [{"id": call.id, "type": "function",
                                      "function": {"name": call.name, "arguments": call.arguments}} for call in self.tool_calls]
        return message

    def counted(self, request: Mapping[str, Any]) -> Reply:
        """This reply with its usage counted in text pieces (`messages.count_text_pieces`) where it has none."""
        if not self.prompt_tokens:
            self.prompt_tokens = count_rendered_pieces(request.get("messages") or [])
        if not self.completion_tokens:
            calls = [f"{call.name} {call.arguments}" for call in self.tool_calls]
            self.completion_tokens = count_text_pieces(" ".join([self.reasoning or "", self.content or "", *calls]))
        return self


def reply_from_message(message: Mapping[str, Any]) -> Reply:
    """A `Reply` from an assistant message in chat-completions form (an upstream's answer, or a policy's)."""
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.append(ReplyCall(function.get("name") or "", arguments, call.get("id") or new_id("call_")))
    content = message.get("content")
    return Reply(content=content if isinstance(content, str) else None, tool_calls=calls, reasoning=reasoning_of(message))


def reply_from_action(action: Any) -> Reply:
    """The policy's action as a `Reply`, or `ActionError` saying why it is none.

    Accepted: text (a leading `<think>...</think>` is the reasoning, every `<tool_call>{...}</tool_call>`
    block a tool call, the rest the content; text that is one JSON tool call is that call); a
    tool-call mapping (`{"name", "arguments"}` or OpenAI's `{"type": "function", "function": {...}}`);
    an assistant message (`{"role": "assistant", "content", "tool_calls", "reasoning_content"}`); or a
    list of tool-call mappings (parallel tool use).
    """
    if isinstance(action, str):
        return _reply_from_text(action)
    if isinstance(action, Mapping):
        if action.get("role") == "assistant":
            return reply_from_message(action)
        return Reply(tool_calls=[_call(action)])
    if isinstance(action, Sequence) and action and all(isinstance(item, Mapping) for item in action):
        return Reply(tool_calls=[_call(item) for item in action])
    raise ActionError("an action is text, a tool-call mapping, a list of them or an assistant message, "
                      f"not {type(action).__name__}")


def _reply_from_text(text: str) -> Reply:
    reasoning = None
    think = _THINK.match(text) if "</think>" in text else None
    if think is not None:
        reasoning, text = think.group(1).strip(), text[think.end():]
    rest, tagged = split_tool_calls(text)
    if tagged:
        return Reply(content=rest or None, tool_calls=[_reply_call(call) for call in tagged], reasoning=reasoning)
    if rest[:1] == "{" and rest[-1:] == "}":  # no blocks: `rest` is the whole text, stripped
        try:
            decoded = json.loads(rest)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and ("name" in decoded or "function" in decoded):
            return Reply(tool_calls=[_call(decoded)], reasoning=reasoning)
    return Reply(content=text if reasoning is None else text.strip(), reasoning=reasoning)


def _call(mapping: Mapping[str, Any]) -> ReplyCall:
    return _reply_call(tool_call_from_mapping(mapping))


def _reply_call(call: ToolCall) -> ReplyCall:
    return ReplyCall(call.name, json.dumps(call.arguments))


def function_tool(name: Any, description: Any, parameters: Any) -> dict[str, Any]:
    """A tool in function-schema form (`gymenvs.core.tools.function_schema`'s shape)."""
    if not isinstance(name, str) or not name:
        raise WireError('every tool needs a "name" (a non-empty string)')
    function: dict[str, Any] = {"name": name, "parameters": parameters if isinstance(parameters, dict) else
                                {"type": "object", "properties": {}}}
    if isinstance(description, str):
        function["description"] = description
    return {"type": "function", "function": function}


def arguments_object(arguments: str) -> dict[str, Any]:
    """Tool-call arguments as an object (Anthropic's `input`); text that is no JSON object is kept under "input"."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


def text_parts(content: Any, what: str, kinds: tuple[str, ...], lenient: bool = False) -> str:
    """The text of a content that is a string or a list of parts whose text types are `kinds`; images
    and files become a placeholder (the policy reads text); other parts are malformed, or (`lenient`, for
    a tool's output, where CLIs put their own part types such as Claude Code's `tool_reference`) a
    placeholder too."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(f"{what}: content must be a string or a list of parts, not {type(content).__name__}")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in kinds:
            texts.append(str(part.get("text", "")))
        elif kind in ("image", "input_image", "image_url", "document", "input_file", "file") or (lenient and kind):
            texts.append(f"[{kind} omitted]")
        else:
            raise WireError(f"{what}: unsupported content part {kind!r} (supported: {', '.join(kinds)}, images, files)")
    return "".join(texts)


def json_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise WireError("the body must be a JSON object")
    return body
