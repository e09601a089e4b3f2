"""`info["request"]` of an agent env: the LLM request the agent waits on, in the one internal form, and which
of its messages are new.

An agent env (SWEAgent-v0, TerminalAgent-v0) puts an `AgentRequest` in `info["request"]` at `reset` and at
every step that does not end the episode. Its `new_messages` are what the observation shows: the messages
after the previous request and the reply it got, or all of them at the first request and when the agent
rewrote its history (`history_rewritten`: it truncated, summarised or compacted it). Extending is judged
by content (`canonical`), so a client that re-serialises the same messages differently is not rewriting.
This is the one place that decides it; the TRL bridge reads `new_messages` and `history_rewritten`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from gymenvs.container.agent.messages import text_of
from gymenvs.container.agent.wire.common import SAMPLING_KEYS

Message = dict[str, Any]


class AgentRequest(TypedDict):
    """The request an agent waits on (see the module docstring). Messages are OpenAI chat messages (roles
    system, user, assistant, tool; an assistant's reasoning in `reasoning_content`), tools OpenAI function
    schemas, whatever wire format the agent spoke."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    new_messages: list[Message]
    history_rewritten: bool
    #: The model the agent asked for.
    model: str
    #: The sampling parameters the agent gave: max_tokens, temperature, top_p, stop, tool_choice, parallel_tool_calls.
    sampling: dict[str, Any]
    stream: bool
    #: The wire format the agent spoke: "chat", "responses" or "anthropic".
    wire: str


def agent_request(body: Mapping[str, Any], wire: str, previous: tuple[Sequence[Message], Message | None] | None) -> AgentRequest:
    """The `AgentRequest` of a request `body` (the internal form) that came after `previous` (the last request's
    messages and the reply it got; None for the episode's first request)."""
    messages = with_tool_names([as_text_content(message) for message in body["messages"]])
    history = None if previous is None else [*previous[0], *([previous[1]] if previous[1] is not None else [])]
    new = messages[len(history):] if history is not None and extends(history, messages) else messages
    return AgentRequest(
        messages=messages, tools=list(body.get("tools") or []), new_messages=new,
        history_rewritten=history is not None and new is messages, model=str(body.get("model", "")),
        sampling={key: body[key] for key in SAMPLING_KEYS if key in body}, stream=bool(body.get("stream")), wire=wire,
    )


def as_text_content(message: Message) -> Message:
    """`message` with a content of text parts only (`[{"type": "text", "text": ...}]`, as pi sends it) as one string,
    the parts joined by newlines as vLLM joins them: many chat templates fail on a list there (Qwen 2.5's, gpt-oss's) or
    write it as Python prints it (Llama 3.1's). A content holding other parts (an image) is kept as it is."""
    content = message.get("content")
    if not isinstance(content, list) or not all(isinstance(part, dict) and part.get("type") == "text" for part in content):
        return message
    return {**message, "content": "\n".join(str(part.get("text", "")) for part in content)}


def with_tool_names(messages: Sequence[Message]) -> list[Message]:
    """`messages` with each tool result named after the call it answers (by `tool_call_id`): the Responses and
    Anthropic formats carry the call's id only, and many families' templates write the tool's name in the result
    (Gemma 4's `response:NAME{...}`, gpt-oss's `functions.NAME to=assistant`)."""
    names: dict[Any, Any] = {}
    named = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id")] = (call.get("function") or {}).get("name")
        if message.get("role") == "tool" and not message.get("name") and names.get(message.get("tool_call_id")):
            message = {**message, "name": names[message["tool_call_id"]]}
        named.append(message)
    return named


def extends(history: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether `messages` starts with `history` (compared by what each message says; a message sent again as it was
    needs no more than the comparison of the two)."""
    return len(messages) >= len(history) and all(a == b or canonical(a) == canonical(b) for a, b in zip(history, messages))


def canonical(message: Mapping[str, Any]) -> tuple:
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
