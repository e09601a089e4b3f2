"""The three wire formats on the agent's channel: conformance to the providers' documented shapes, the
official SDK clients over the channel's real socket with a scripted policy, and side calls."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.agent.channel import AgentRequest, ChannelError, LLMChannel
from gymenvs.container.agent.wire import (
    SIDE_MODEL,
    Reply,
    ReplyCall,
    WireError,
    reply_from_action,
    respond,
    route,
    side_call_kind,
)
from gymenvs.container.agent.wire import anthropic as anthropic_wire
from gymenvs.container.agent.wire import chat as chat_wire
from gymenvs.container.agent.wire import responses as responses_wire

from .agent_support import bash, swe_agent_env, wire_agent

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
LS = ReplyCall("bash", '{"command": "ls"}', "call_1")
PWD = ReplyCall("bash", '{"command": "pwd"}', "call_2")
REPLIES = {
    "text": Reply(content="done"),
    "one tool call": Reply(tool_calls=[LS]),
    "parallel tool calls": Reply(content="Two at once.", tool_calls=[LS, PWD]),
    "thinking and a tool call": Reply(reasoning="I should list the files.", tool_calls=[LS]),
}


def fresh(reply: Reply) -> Reply:
    return Reply(reply.content, [ReplyCall(c.name, c.arguments, c.id) for c in reply.tool_calls], reply.reasoning)


def sse_events(data: bytes) -> list[dict[str, Any]]:
    """The JSON of each `data:` line (not `[DONE]`), checking each typed event's `event:` line names its type."""
    events = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        if lines["data"] == "[DONE]":
            continue
        event = json.loads(lines["data"])
        if "event" in lines:
            assert lines["event"] == event["type"]
        events.append(event)
    return events


# -- requests: each format's documented shapes to the one internal form ------------------------------------------


def test_an_anthropic_request_becomes_the_internal_form():
    body = {
        "model": "policy",
        "max_tokens": 512,
        "stream": True,
        "stop_sequences": ["END"],
        "system": [
            {"type": "text", "text": "You are Claude."},
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [
            {"name": "Bash", "description": "Run bash.", "input_schema": BASH},
            {"type": "web_search_20250305", "name": "web_search"},
        ],  # a server tool: not the policy's
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<reminder>"}, {"type": "text", "text": "List files."}]},
            {"role": "system", "content": "Environment: Linux."},  # Claude Code sends one inside messages
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "ls it", "signature": "s"},
                    {"type": "text", "text": "Listing."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pwd"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "is_error": False,
                        "content": [{"type": "text", "text": "/testbed"}, {"type": "tool_reference", "tool_name": "Read"}],
                    },
                    {"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
    request = anthropic_wire.request(body)
    assert request["messages"] == [
        {"role": "system", "content": "You are Claude.Be brief."},
        {"role": "user", "content": "<reminder>List files."},
        {"role": "system", "content": "Environment: Linux."},
        {
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "ls it",
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "ls"}'}},
                {"id": "toolu_2", "type": "function", "function": {"name": "Bash", "arguments": '{"command": "pwd"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "/testbed[tool_reference omitted]"},  # a CLI's own part
        {"role": "user", "content": "Go on."},
    ]
    assert request["tools"] == [
        {"type": "function", "function": {"name": "Bash", "description": "Run bash.", "parameters": BASH}}
    ]
    assert (request["max_tokens"], request["stop"], request["stream"]) == (512, ["END"], True)
    assert (request["tool_choice"], request["parallel_tool_calls"]) == ("required", False)


def test_a_responses_request_becomes_the_internal_form():
    body = {
        "model": "policy",
        "instructions": "You are Codex.",
        "max_output_tokens": 100,
        "tool_choice": "auto",
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": BASH, "strict": False},
            {"type": "custom", "name": "apply_patch", "description": "Patch files."},
            {"type": "web_search"},
        ],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"role": "user", "content": "List files."},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "think"},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "exec_command", "arguments": '{"cmd": "pwd"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "/testbed"}]},
            {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"},
        ],
    }
    request = responses_wire.request(body)
    call = lambda i, name, arguments: {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}  # noqa: E731
    assert request["messages"] == [
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "think",
            "tool_calls": [call(1, "exec_command", '{"cmd": "ls"}'), call(2, "exec_command", '{"cmd": "pwd"}')],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "call_2", "content": "/testbed"},
        {"role": "assistant", "content": None, "tool_calls": [call(3, "apply_patch", '{"input": "*** Begin Patch"}')]},
        {"role": "tool", "tool_call_id": "call_3", "content": "Done!"},
    ]
    assert [tool["function"]["name"] for tool in request["tools"]] == ["exec_command", "apply_patch"]
    assert request["max_tokens"] == 100 and request["tool_choice"] == "auto"


def test_previous_response_id_is_served_from_the_episodes_history():
    conversations: dict[str, list] = {}
    first = responses_wire.request({"model": "m", "instructions": "Be brief.", "input": "List files."})
    payload, _ = respond(
        responses_wire, first, {"instructions": "Be brief."}, fresh(REPLIES["one tool call"]), "m", conversations
    )
    follow_up = {
        "model": "m",
        "instructions": "Be brief.",
        "previous_response_id": payload["id"],
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}],
    }
    messages = responses_wire.request(follow_up, conversations)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]  # the instructions once
    assert messages[2]["tool_calls"][0]["id"] == "call_1"
    with pytest.raises(WireError, match="not a response of this episode"):
        responses_wire.request({**follow_up, "previous_response_id": "resp_elsewhere"}, conversations)


@pytest.mark.parametrize(
    ("wire", "body", "words"),
    [
        (chat_wire, {"model": "m"}, '"messages" must be'),
        (anthropic_wire, {"model": "m", "messages": []}, '"messages" must be'),
        (anthropic_wire, {"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "unsupported content part 'video'"),
        (anthropic_wire, {"messages": [{"role": "tool", "content": "x"}]}, "role must be user or assistant"),
        (responses_wire, {"model": "m", "input": 7}, '"input" must be'),
        (responses_wire, {"input": [{"type": "item_reference", "id": "x"}]}, "unsupported input item type 'item_reference'"),
        (responses_wire, {"input": [{"type": "function_call_output", "output": "x"}]}, '"call_id"'),
    ],
    ids=[
        "chat no messages",
        "anthropic empty",
        "anthropic video",
        "anthropic tool role",
        "responses input",
        "responses item_reference",
        "responses no call_id",
    ],
)
def test_malformed_or_unsupported_requests_are_refused_with_a_reason(wire, body, words):
    with pytest.raises(WireError, match=words.replace("(", r"\(")):
        wire.request(body)


# -- replies: documented shapes, whole and streamed -----------------------------------------------------------------

ANTHROPIC_STOP = {
    "text": "end_turn",
    "one tool call": "tool_use",
    "parallel tool calls": "tool_use",
    "thinking and a tool call": "tool_use",
}


@pytest.mark.parametrize("name", REPLIES)
def test_anthropic_replies_are_messages_and_stream_in_the_documented_order(name):
    request = {"messages": [{"role": "user", "content": "hi"}]}
    payload = anthropic_wire.response(fresh(REPLIES[name]), request, "policy")
    message = Message.model_validate(payload)
    assert message.stop_reason == ANTHROPIC_STOP[name] and message.model == "policy" and message.id.startswith("msg_")
    kinds = [block.type for block in message.content]
    expected = (["thinking"] if REPLIES[name].reasoning else []) + (["text"] if REPLIES[name].content else [])
    assert kinds == expected + ["tool_use"] * len(REPLIES[name].tool_calls)
    assert all(block.id.startswith("toolu_") for block in message.content if block.type == "tool_use")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0

    events = sse_events(anthropic_wire.stream(payload, request))
    adapter: TypeAdapter = TypeAdapter(RawMessageStreamEvent)
    for event in events:
        adapter.validate_python(event)
    order = [event["type"] for event in events]
    per_block = [t for t in order[1:-2]]
    assert order[0] == "message_start" and order[-2:] == ["message_delta", "message_stop"]
    assert per_block.count("content_block_start") == per_block.count("content_block_stop") == len(kinds)
    assert events[-2]["delta"]["stop_reason"] == ANTHROPIC_STOP[name]
    assert events[0]["message"]["content"] == [] and events[0]["message"]["stop_reason"] is None


RESPONSES_ITEMS = {
    "text": ["message"],
    "one tool call": ["function_call"],
    "parallel tool calls": ["message", "function_call", "function_call"],
    "thinking and a tool call": ["reasoning", "function_call"],
}


@pytest.mark.parametrize("name", REPLIES)
def test_responses_replies_are_responses_and_stream_in_the_documented_order(name):
    request = {"messages": [{"role": "user", "content": "hi"}]}
    payload = responses_wire.response(fresh(REPLIES[name]), request, "policy", {"include": ["reasoning.encrypted_content"]})
    response = Response.model_validate(payload)
    assert [item.type for item in response.output] == RESPONSES_ITEMS[name]
    assert response.status == "completed" and response.model == "policy" and response.id.startswith("resp_")
    assert (
        response.usage is not None and response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments) for c in calls] == [(c.id, c.arguments) for c in REPLIES[name].tool_calls]

    events = sse_events(responses_wire.stream(payload, request))
    adapter: TypeAdapter = TypeAdapter(ResponseStreamEvent)
    for event in events:
        adapter.validate_python(event)
    order = [event["type"] for event in events]
    assert order[:2] == ["response.created", "response.in_progress"] and order[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert order.count("response.output_item.added") == order.count("response.output_item.done") == len(RESPONSES_ITEMS[name])
    if calls:
        assert order.index("response.function_call_arguments.delta") < order.index("response.function_call_arguments.done")
    if REPLIES[name].content:
        text = [e for e in events if e["type"] == "response.output_text.done"]
        assert [e["text"] for e in text] == [REPLIES[name].content]


def test_a_custom_tool_call_goes_back_as_a_custom_tool_call():
    raw = {"tools": [{"type": "custom", "name": "apply_patch"}]}
    reply = reply_from_action({"name": "apply_patch", "arguments": {"input": "*** Begin Patch"}})
    (item,) = Response.model_validate(responses_wire.response(reply, {"messages": []}, "m", raw)).output
    assert item.type == "custom_tool_call" and item.input == "*** Begin Patch"


@pytest.mark.parametrize("name", REPLIES)
def test_chat_replies_are_completions_and_stream_as_chunks(name):
    request = {"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}}
    payload = chat_wire.response(fresh(REPLIES[name]), request, "policy")
    completion = ChatCompletion.model_validate(payload)
    assert completion.choices[0].finish_reason == ("stop" if name == "text" else "tool_calls")
    assert len(completion.choices[0].message.tool_calls or []) == len(REPLIES[name].tool_calls)
    data = chat_wire.stream(payload, request)
    assert data.endswith(b"data: [DONE]\n\n")
    chunks = [ChatCompletionChunk.model_validate(chunk) for chunk in sse_events(data)]
    assert chunks[-1].choices == [] and chunks[-1].usage == completion.usage  # include_usage: the last chunk
    assert chunks[-2].choices[0].finish_reason == completion.choices[0].finish_reason


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            '<think>look first</think>\nI will list.\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
            '<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>',
            ("I will list.", ["ls", "pwd"], "look first"),
        ),
        (
            [
                {"name": "bash", "arguments": {"command": "ls"}},
                {"type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}},
            ],
            (None, ["ls", "pwd"], None),
        ),
        (
            {
                "role": "assistant",
                "content": "x",
                "reasoning_content": "r",
                "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "ls"}}}],
            },
            ("x", ["ls"], "r"),
        ),
        ("Just text.", ("Just text.", [], None)),
    ],
    ids=["tagged text", "list of calls", "assistant message", "text"],
)
def test_the_policys_action_becomes_one_reply(action, expected):
    reply = reply_from_action(action)
    assert (reply.content, [json.loads(c.arguments)["command"] for c in reply.tool_calls], reply.reasoning) == expected


# -- side calls --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "headers", "body", "kind"),
    [
        ("/v1/messages/count_tokens", {}, {"messages": [{"role": "user", "content": "hi"}]}, "count_tokens"),
        (
            "/v1/responses",
            {"x-codex-turn-metadata": '{"request_kind": "compaction", "turn_id": "t"}'},
            {"input": "Summarise."},
            "compaction",
        ),
        ("/v1/responses", {"x-codex-turn-metadata": '{"request_kind": "turn"}'}, {"input": "Fix it."}, None),
        (
            "/v1/messages?beta=true",
            {},
            {"model": SIDE_MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "t"}]},
            "small_model",
        ),
        ("/v1/messages", {}, {"model": "policy", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}, "quota"),
        (
            "/v1/chat/completions",
            {},
            {
                "messages": [
                    {"role": "system", "content": "You are a title generator. You output ONLY"},
                    {"role": "user", "content": "Fix it."},
                ]
            },
            "title",
        ),
        (
            "/v1/chat/completions",
            {},
            {
                "messages": [{"role": "system", "content": "You are opencode."}, {"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "bash"}}],
            },
            None,
        ),
    ],
    ids=["count_tokens", "codex compaction", "codex turn", "side model", "quota probe", "title", "main turn"],
)
def test_side_calls_are_told_from_main_turns(path, headers, body, kind):
    where = route(path)
    assert where is not None
    assert side_call_kind(where.endpoint, headers, where.wire.request(body)) == kind


# -- the official SDK clients over the channel's socket ----------------------------------------------------------------


class ScriptedPolicy:
    """Serves a channel as the env does: main turns get the next scripted action, side calls a minimal answer
    (and never reach the script)."""

    def __init__(self, channel: LLMChannel, actions: list[Any]):
        self.channel, self.actions = channel, list(actions)
        self.requests: list[dict] = []
        self.side: list[str] = []
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            event = self.channel.next_event(10)
            if isinstance(event, ChannelError):
                self.errors.append(event.message)
                continue
            if not isinstance(event, AgentRequest):
                return
            call = event.call
            if call.side == "count_tokens":
                self.side.append(call.side)
                call.answer(200, anthropic_wire.count_tokens(call.body))
                continue
            if call.side is not None:
                self.side.append(call.side)
                reply = Reply(content="ok")
            else:
                self.requests.append(call.body)
                if not self.actions:  # a call the script did not expect reached the policy
                    call.answer(500, call.wire.error("the scripted policy has no reply left", "api_error"))
                    continue
                reply = reply_from_action(self.actions.pop(0))
            payload, _ = respond(call.wire, call.body, call.raw or {}, reply, "policy", self.channel.conversations)
            call.answer(200, payload)


@pytest.fixture
def channel() -> Iterator[LLMChannel]:
    channel = LLMChannel(model_name="policy", read_timeout=2.0)
    yield channel
    channel.close()


def http_client(channel: LLMChannel) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(channel.socket_path)))


def anthropic_client(channel: LLMChannel, auth: str = "bearer") -> anthropic.Anthropic:
    """The Anthropic SDK on the channel's socket (it brings its own fork of httpx, `httpx2`), sending the key as
    `Authorization: Bearer` (this SDK does for `api_key` and `auth_token`) or as `x-api-key` only (as Claude Code
    with ANTHROPIC_API_KEY and Pi do)."""
    import httpx2

    transport = httpx2.HTTPTransport(uds=str(channel.socket_path))
    headers: dict[str, Any] = {"x-api-key": channel.token, "Authorization": anthropic.omit} if auth == "x-api-key" else {}
    return anthropic.Anthropic(
        base_url="http://localhost",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
        timeout=20,
        api_key=channel.token,
        default_headers=headers,
    )


TWO_CALLS = [{"name": "bash", "arguments": {"command": "ls"}}, {"name": "bash", "arguments": {"command": "pwd"}}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_openai_sdk_speaks_chat_completions_to_the_channel(channel, stream):
    policy = ScriptedPolicy(channel, [TWO_CALLS, "<think>both ran</think>done"])
    client = openai.OpenAI(
        base_url="http://localhost/v1", api_key=channel.token, http_client=http_client(channel), max_retries=0, timeout=20
    )
    tools = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]
    messages: list[Any] = [{"role": "user", "content": "List files."}]
    if stream:
        with client.chat.completions.stream(model="policy", messages=messages, tools=tools) as events:  # type: ignore[arg-type]
            first = events.get_final_completion()
    else:
        first = client.chat.completions.create(model="policy", messages=messages, tools=tools)  # type: ignore[arg-type]
    calls = first.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments)["command"] for c in calls] == ["ls", "pwd"]  # type: ignore[union-attr]
    assert first.choices[0].finish_reason == "tool_calls"
    messages += [first.choices[0].message.model_dump(exclude_none=True)]
    messages += [{"role": "tool", "tool_call_id": c.id, "content": "out"} for c in calls]
    second = client.chat.completions.create(model="policy", messages=messages, tools=tools)  # type: ignore[arg-type]
    assert second.choices[0].message.content == "done" and second.choices[0].finish_reason == "stop"
    assert [m["role"] for m in policy.requests[1]["messages"]] == ["user", "assistant", "tool", "tool"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_openai_sdk_speaks_responses_to_the_channel(channel, stream):
    policy = ScriptedPolicy(channel, [TWO_CALLS, "done"])
    client = openai.OpenAI(
        base_url="http://localhost/v1", api_key=channel.token, http_client=http_client(channel), max_retries=0, timeout=20
    )
    tools: Any = [{"type": "function", "name": "bash", "parameters": BASH, "strict": False}]
    if stream:
        with client.responses.stream(model="policy", instructions="Be brief.", input="List files.", tools=tools) as events:
            first = events.get_final_response()
    else:
        first = client.responses.create(model="policy", instructions="Be brief.", input="List files.", tools=tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [json.loads(c.arguments)["command"] for c in calls] == ["ls", "pwd"]
    outputs: Any = [{"type": "function_call_output", "call_id": c.call_id, "output": "out"} for c in calls]
    second = client.responses.create(
        model="policy", instructions="Be brief.", previous_response_id=first.id, input=outputs, tools=tools
    )
    assert second.output_text == "done"
    assert [m["role"] for m in policy.requests[1]["messages"]] == ["system", "user", "assistant", "tool", "tool"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("auth", ["x-api-key", "bearer"])
def test_the_anthropic_sdk_speaks_messages_to_the_channel(channel, stream, auth):
    policy = ScriptedPolicy(
        channel,
        [
            "<think>two commands</think><tool_call>"
            + json.dumps(TWO_CALLS[0])
            + "</tool_call><tool_call>"
            + json.dumps(TWO_CALLS[1])
            + "</tool_call>",
            "done",
        ],
    )
    client = anthropic_client(channel, auth)
    tools: Any = [{"name": "bash", "description": "Run bash.", "input_schema": BASH}]
    messages: list[Any] = [{"role": "user", "content": "List files."}]
    assert client.messages.count_tokens(model="policy", messages=messages, tools=tools).input_tokens > 0
    if stream:
        with client.beta.messages.stream(
            model="policy", max_tokens=100, system="Be brief.", messages=messages, tools=tools
        ) as events:
            first: Any = events.get_final_message()
    else:
        first = client.messages.create(model="policy", max_tokens=100, system="Be brief.", messages=messages, tools=tools)
    assert [block.type for block in first.content] == ["thinking", "tool_use", "tool_use"] and first.stop_reason == "tool_use"
    assert first.content[0].thinking == "two commands"
    uses = [block for block in first.content if block.type == "tool_use"]
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "out"} for u in uses]},
    ]
    second = client.messages.create(model="policy", max_tokens=100, system="Be brief.", messages=messages, tools=tools)
    assert second.content[0].type == "text" and second.content[0].text == "done" and second.stop_reason == "end_turn"
    history = policy.requests[1]["messages"]
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "tool"]
    assert history[2]["reasoning_content"] == "two commands"  # the thinking block came back
    assert policy.side == ["count_tokens"] and not policy.errors


def test_side_calls_over_the_socket_never_reach_the_policy(channel):
    policy = ScriptedPolicy(channel, ["main answer"])
    client = anthropic_client(channel)
    title = client.messages.create(model=SIDE_MODEL, max_tokens=20, messages=[{"role": "user", "content": "Title this."}])
    quota = client.messages.create(model="policy", max_tokens=1, messages=[{"role": "user", "content": "quota"}])
    main = client.messages.create(model="policy", max_tokens=20, messages=[{"role": "user", "content": "Fix it."}])
    assert (title.content[0].text, quota.content[0].text, main.content[0].text) == ("ok", "ok", "main answer")  # type: ignore[union-attr]
    assert policy.side == ["small_model", "quota"] and len(policy.requests) == 1


def test_a_head_probe_without_a_key_is_answered_and_ends_nothing(channel):
    with http_client(channel) as client:
        assert client.head("http://localhost/api/hello").status_code == 200
        models = client.get("http://localhost/v1/models", headers={"x-api-key": channel.token, "anthropic-version": "2023-06-01"})
    assert models.json()["data"][0]["id"] == "policy"
    assert channel.next_event(0.2) is None


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        (
            "/v1/messages",
            {"model": "m", "max_tokens": 5, "messages": "hi"},
            {"type": "error", "error": {"type": "invalid_request_error"}},
        ),
        (
            "/v1/responses",
            {"model": "m", "input": [{"type": "item_reference", "id": "x"}]},
            {"error": {"type": "invalid_request_error"}},
        ),
        ("/v1/responses/compact", {"model": "m", "input": "x"}, {"error": {"type": "invalid_request_error"}}),
    ],
    ids=["anthropic", "responses", "unknown route"],
)
def test_a_malformed_request_is_refused_in_its_own_format_and_ends_the_episode(channel, path, body, expected):
    with http_client(channel) as client:
        answer = client.post("http://localhost" + path, json=body, headers={"Authorization": f"Bearer {channel.token}"})
    assert answer.status_code in (400, 404)
    payload = answer.json()
    for key, value in expected.items():
        assert (
            isinstance(payload[key], dict) and payload[key]["type"] == value["type"]
            if isinstance(value, dict)
            else payload[key] == value
        )
    event = channel.next_event(5)
    assert isinstance(event, ChannelError) and not event.infra


# -- SWEAgent-v0 in a real container: an agent speaking each format through the forwarder -----------------------------


@pytest.fixture
def agent_env(swe_images):
    from gymenvs.container.agent.env import AgentEnv

    envs: list[AgentEnv] = []

    def make(agent: Any) -> AgentEnv:
        envs.append(swe_agent_env(agent=agent, call_timeout_s=60.0, instance_ids=[FIXTURE_IDS[0]]))
        return envs[-1]

    yield make
    for env in envs:
        env.close()


SIDE_KINDS = {"chat": ["small_model"], "responses": ["small_model", "compaction"], "anthropic": ["count_tokens", "small_model"]}


@pytest.mark.docker
@pytest.mark.parametrize("wire", ["chat", "responses", "anthropic"])
def test_an_agent_speaking_each_format_streamed_runs_an_episode_in_one_internal_form(agent_env, wire):
    env = agent_env(wire_agent(wire))
    observation, info = env.reset(seed=0)
    # Whatever the agent spoke, the policy sees one form: its system prompt, the task, function-schema tools.
    assert info["request"]["wire"] == wire and observation.startswith("[system]\nYou are the wire test agent.\n\n[user]\n")
    assert [m["role"] for m in info["request"]["messages"]] == ["system", "user"]
    assert info["tools"] == [
        {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": BASH}}
    ]
    assert info["side_calls"] == len(SIDE_KINDS[wire])  # answered before the first main turn, never shown to the policy

    parallel = (
        "<tool_call>"
        + json.dumps(bash("echo one-$((1 + 0))"))
        + "</tool_call><tool_call>"
        + json.dumps(bash("pwd"))
        + "</tool_call>"
    )
    observation, _, terminated, truncated, info = env.step(parallel)
    assert not (terminated or truncated) and not info["request"]["history_rewritten"]
    assert observation == "[tool] (bash)\none-1\n\n[tool] (bash)\n/testbed"  # both calls ran in the container, in order
    assert [m["role"] for m in info["request"]["messages"]] == ["system", "user", "assistant", "tool", "tool"]

    _, reward, terminated, truncated, info = env.step("<think>Nothing to change.</think>All done.")
    assert terminated and not truncated and info["exit_code"] == 0, info.get("error")
    assert "final: All done." in info["agent_log"]
    trajectory = info["trajectory"]
    assert [record["side"] for record in trajectory] == [*SIDE_KINDS[wire], None, None]
    assert {record["wire"] for record in trajectory} == {wire} and info["side_calls"] == len(SIDE_KINDS[wire])


@pytest.mark.docker
def test_a_malformed_request_ends_that_episode_with_a_clear_error(agent_env):
    env = agent_env(wire_agent("anthropic", GYMENVS_MALFORMED="1"))
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(bash("true"))
    assert truncated and not terminated
    assert info["error"].startswith("malformed request: anthropic request:") and '"messages" must be' in info["error"]
    assert info["outcome_reason"] == "protocol_error"


# -- history by content: re-serialised histories are not rewrites -------------------------------------------------


def test_claude_codes_reserialised_history_still_extends_the_previous_request():
    """Claude Code moves `cache_control` every turn and resends a block list as a string: by content, that is the
    same history (a byte-level check would call every turn a rewrite)."""
    from gymenvs.container.agent.request import extends

    system_blocks = [{"type": "text", "text": "Environment: Linux.", "cache_control": {"type": "ephemeral"}}]
    first_body = {
        "system": [{"type": "text", "text": "You are Claude."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List files.", "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": system_blocks},
        ],
    }
    first = anthropic_wire.request(first_body)
    reply = Reply(content="Listing.", tool_calls=[ReplyCall("Bash", '{"command": "ls", "timeout": 5}')], reasoning="ls it")
    payload, reply_message = respond(anthropic_wire, first, first_body, reply, "policy", {})
    # Echoed as Claude Code does with `thinking.display: "omitted"` (no thinking text), and its tool input's keys
    # in another order.
    echoed = [
        {**block, "thinking": "", "signature": "s"} if block["type"] == "thinking" else block for block in payload["content"]
    ]
    echoed[-1] = {**echoed[-1], "input": {"timeout": 5, "command": "ls"}}
    tool_use_id = echoed[-1]["id"]
    second_body = {
        "system": [{"type": "text", "text": "You are Claude."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List files."}]},
            {"role": "system", "content": "Environment: Linux."},  # the same text, now a string
            {"role": "assistant", "content": echoed},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use_id,
                        "content": "a.txt",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }
    second = anthropic_wire.request(second_body)
    assert extends([*first["messages"], reply_message], second["messages"])
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": tool_use_id, "content": "a.txt"}
    # ... and a real rewrite (a summary in place of the history) is one.
    summary = anthropic_wire.request({"messages": [{"role": "user", "content": "Summary: listed files."}]})
    assert not extends([*first["messages"], reply_message], summary["messages"])


def test_codex_echoing_its_reply_items_still_extends_the_previous_request():
    from gymenvs.container.agent.request import extends

    body = {
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files."}]},
        ]
    }
    first = responses_wire.request(body)
    reply = Reply(content="Two at once.", tool_calls=[LS, PWD], reasoning="both")
    raw = {**body, "include": ["reasoning.encrypted_content"]}
    payload, reply_message = respond(responses_wire, first, raw, reply, "policy", {})
    outputs = [{"type": "function_call_output", "call_id": c.id, "output": "x"} for c in (LS, PWD)]
    second = responses_wire.request({"input": [*body["input"], *payload["output"], *outputs]})
    assert extends([*first["messages"], reply_message], second["messages"])
    assert second["messages"][2]["reasoning_content"] == "both"  # the reasoning item came back


def test_an_agent_request_says_which_messages_are_new():
    """`agent_request`: the first request's messages are all new; a request that extends the previous one and its
    reply (by content: a re-serialised Anthropic history) has only what follows them as new; one that does not is
    a rewrite, new in full. The sampling parameters, the stream flag and the wire are read from the request."""
    from gymenvs.container.agent.request import AgentRequest, agent_request

    first_body = {"system": "Be brief.", "max_tokens": 64, "temperature": 0.5, "stream": True,
                  "messages": [{"role": "user", "content": [{"type": "text", "text": "List files."}]}]}
    first_internal = anthropic_wire.request(first_body)
    first = agent_request(first_internal, "anthropic", None)
    assert set(first) == set(AgentRequest.__annotations__)
    assert first["new_messages"] == first["messages"] == first_internal["messages"] and not first["history_rewritten"]
    assert (first["sampling"], first["stream"], first["wire"]) == ({"max_tokens": 64, "temperature": 0.5}, True, "anthropic")
    payload, reply = respond(anthropic_wire, first_internal, first_body, fresh(REPLIES["one tool call"]), "policy", {})
    tool_use_id = payload["content"][0]["id"]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "a"}]}
    second_body = {**first_body, "messages": [{"role": "user", "content": "List files."},  # now a string: the same text
                                              {"role": "assistant", "content": payload["content"]}, result]}
    second = agent_request(anthropic_wire.request(second_body), "anthropic", (first["messages"], reply))
    assert not second["history_rewritten"] and len(second["messages"]) == 4
    # the result carries the call's id only: it is named after the call it answers, as templates that write the
    # tool's name in a result need (Gemma 4, gpt-oss)
    assert second["new_messages"] == second["messages"][3:] == [
        {"role": "tool", "tool_call_id": tool_use_id, "name": "bash", "content": "a"}]
    rewritten_body = {**first_body, "messages": [{"role": "user", "content": "Summary: listed files."}]}
    rewritten = agent_request(anthropic_wire.request(rewritten_body), "anthropic", (second["messages"], reply))
    assert rewritten["history_rewritten"] and rewritten["new_messages"] == rewritten["messages"]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"side_calls": "upstream"}, "side_calls='upstream' with upstream_url=None"),
        ({"upstream_url": "http://upstream/v1"}, "interception mode takes none unless side_calls='upstream'"),
        ({"side_calls": "everything"}, "side_calls"),
    ],
)
def test_bad_side_call_options_are_refused_at_construction(options, words):
    from gymenvs.container.agent.options import AgentConfig

    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        AgentConfig(**options)
    assert AgentConfig(side_calls="upstream", upstream_url="http://upstream/v1").side_responder == "upstream"
    assert AgentConfig(mode="black-box", upstream_url="http://upstream/v1").side_responder == "upstream"
    assert AgentConfig().side_responder == "minimal"


@pytest.mark.parametrize("wire", ["responses", "anthropic"])
def test_the_trl_bridge_renders_the_internal_form_of_every_format(wire):
    """What the TRL bridge renders is `info["request"]`: the internal form, whatever the agent spoke."""
    from wrappers.trl.extras.tiny_model import tiny_tokenizer
    from wrappers.trl.rollout.agent import request_prompt_ids
    from wrappers.trl.rollout.transcript import ChatRenderer

    bodies = {
        "responses": {
            "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "bash", "parameters": BASH}],
            "input": [
                {"role": "user", "content": "List files."},
                {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"command": "ls"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
            ],
        },
        "anthropic": {
            "system": "Be brief.",
            "tools": [{"name": "bash", "input_schema": BASH}],
            "messages": [
                {"role": "user", "content": "List files."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.txt"}]},
            ],
        },
    }
    request = {"responses": responses_wire, "anthropic": anthropic_wire}[wire].request(bodies[wire])
    tokenizer = tiny_tokenizer()
    text = tokenizer.decode(request_prompt_ids(ChatRenderer(tokenizer, None), request))
    assert "Be brief." in text and "List files." in text and "a.txt" in text and '"bash"' in text
    assert text.index("Be brief.") < text.index("List files.") < text.index("a.txt")


def test_text_parts_reach_the_policy_as_one_text_and_other_parts_as_they_are():
    """pi sends a content of text parts: the policy's messages hold it as one string (joined by
    newlines, as vLLM joins them), which every chat template writes as text; a content with an image is kept."""
    from gymenvs.container.agent.request import agent_request

    image = [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]
    body = {"messages": [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                         {"role": "user", "content": [{"type": "text", "text": "Fix it."}, {"type": "text", "text": "Now."}]},
                         {"role": "user", "content": image}]}
    request = agent_request(chat_wire.request(body), "chat", None)
    assert [message["content"] for message in request["messages"]] == ["Be brief.", "Fix it.\nNow.", image]
