"""The host end of an agent's LLM channel, over a real unix socket (no container needed)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from openai.types.chat import ChatCompletion

from gymenvs.container.agent.channel import AgentExited, AgentRequest, ChannelError, LLMChannel
from gymenvs.container.agent.messages import PromptPieces, count_rendered_pieces, count_text_pieces, render
from gymenvs.container.agent.wire import Reply, ReplyCall, respond
from gymenvs.container.agent.wire import chat as chat_wire
from gymenvs.container.reaper import reap_directories


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 10):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def post(channel: LLMChannel, body, token: str | None = None, path: str = "/v1/chat/completions"):
    connection = UnixHTTPConnection(str(channel.socket_path))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token or channel.token}", "Content-Type": "application/json"}
    connection.request("POST", path, data, headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, payload


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def channel():
    channel = LLMChannel(model_name="m", read_timeout=1.0)
    yield channel
    channel.close()


def answer_next(channel: LLMChannel, content: str) -> dict:
    event = channel.next_event(10)
    assert isinstance(event, AgentRequest)
    call = event.call
    payload, _ = respond(call.wire, call.body, call.raw or {}, Reply(content=content), "m", {})
    event.call.answer(200, payload)
    return event.call.body


def test_a_request_waits_for_its_reply(channel):
    threading.Thread(target=answer_next, args=(channel, "hello"), daemon=True).start()
    status, payload = post(channel, CHAT)
    assert status == 200
    assert json.loads(payload)["choices"][0]["message"]["content"] == "hello"


def test_a_streamed_request_gets_server_sent_events(channel):
    threading.Thread(target=answer_next, args=(channel, "streamed"), daemon=True).start()
    status, payload = post(channel, {**CHAT, "stream": True})
    events = [line.removeprefix(b"data: ") for line in payload.split(b"\n\n") if line]
    assert status == 200 and events[-1] == b"[DONE]"
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "streamed"


@pytest.mark.parametrize(("body", "token", "expected_status", "words"), [
    (CHAT, "wrong-token", 401, "API key"),
    (b"{not json", None, 400, "not JSON"),
    ({"model": "m"}, None, 400, "messages"),
])
def test_a_bad_request_is_refused_and_ends_the_episode(channel, body, token, expected_status, words):
    status, payload = post(channel, body, token=token)
    assert status == expected_status
    event = channel.next_event(5)
    assert isinstance(event, ChannelError) and words in event.message


def test_a_second_request_while_one_waits_ends_the_episode(channel):
    first = threading.Thread(target=post, args=(channel, CHAT), daemon=True)
    first.start()
    assert isinstance(channel.next_event(5), AgentRequest)
    status, _ = post(channel, CHAT)
    assert status == 429
    event = channel.next_event(5)
    assert isinstance(event, ChannelError) and "one call at a time" in event.message
    channel.close()  # releases the first request
    first.join(5)
    assert not first.is_alive()


def test_a_body_that_never_arrives_ends_the_episode(channel):
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(channel.socket_path))
    raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + channel.token.encode()
                + b"\r\nContent-Length: 100\r\n\r\n{")
    event = channel.next_event(10)
    assert isinstance(event, ChannelError) and "did not arrive" in event.message
    raw.close()


def test_expect_100_continue_is_answered_before_the_body(channel):
    """The reply's writer is buffered (one write per reply): the interim `100 Continue` must still leave at once."""
    body = json.dumps(CHAT).encode()
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.settimeout(5)
    raw.connect(str(channel.socket_path))
    raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + channel.token.encode()
                + b"\r\nExpect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    assert raw.recv(1024).startswith(b"HTTP/1.1 100 Continue\r\n")
    raw.sendall(body)
    assert answer_next(channel, "continued")["messages"][0]["content"] == "hi"
    raw.close()


def read_response(raw: socket.socket) -> tuple[int, bytes]:
    """The next HTTP response on a kept-alive connection (each is read whole before the next is sent): status, body."""
    response = http.client.HTTPResponse(raw)
    response.begin()
    return response.status, response.read()


def test_a_chunked_request_sent_a_byte_at_a_time_and_one_pipelined_behind_it_are_answered_in_order(channel):
    body = json.dumps(CHAT).encode()
    auth = b"Authorization: Bearer " + channel.token.encode() + b"\r\n"
    chunked = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n"
               + f"{len(body[:10]):x}\r\n".encode() + body[:10] + b"\r\n"
               + f"{len(body[10:]):x}\r\n".encode() + body[10:] + b"\r\n0\r\n\r\n")
    plain = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth
             + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.settimeout(10)
    raw.connect(str(channel.socket_path))
    for byte in chunked + plain:  # the second request is on its way before the first is answered
        raw.sendall(bytes([byte]))
    assert answer_next(channel, "first")["messages"] == CHAT["messages"]
    assert json.loads(read_response(raw)[1])["choices"][0]["message"]["content"] == "first"
    assert answer_next(channel, "second")["messages"] == CHAT["messages"]
    assert json.loads(read_response(raw)[1])["choices"][0]["message"]["content"] == "second"
    raw.close()


@pytest.mark.parametrize(("request_bytes", "expected_status"), [
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 411),  # neither a length nor chunks
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n", 400),
    (b"this is not HTTP\r\n\r\n", 400),
], ids=["no length", "bad length", "not HTTP"])
def test_a_request_that_is_not_well_framed_is_refused(channel, request_bytes, expected_status):
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.settimeout(10)
    raw.connect(str(channel.socket_path))
    raw.sendall(request_bytes)
    assert read_response(raw)[0] == expected_status
    raw.close()


def post_in_thread(channel: LLMChannel) -> tuple[threading.Thread, dict]:
    """A waiting agent's request; the result holds its status, or the error its connection ended with."""
    result: dict = {}

    def send():
        try:
            result["status"] = post(channel, CHAT)[0]
        except Exception as exc:  # noqa: BLE001 - a dropped connection is what the tests look for
            result["error"] = repr(exc)

    waiter = threading.Thread(target=send)
    waiter.start()
    return waiter, result


def test_close_releases_a_waiting_agent_and_leaves_nothing(channel):
    before = threading.active_count()
    waiter, result = post_in_thread(channel)
    assert isinstance(channel.next_event(5), AgentRequest)
    channel.close()
    waiter.join(5)
    assert result == {"status": 503}
    assert not channel.directory.exists()
    assert threading.active_count() <= before


def test_an_event_posted_by_another_thread_ends_a_wait_at_once(channel):
    """The waiting thread reads the channel's sockets itself; an event from another thread (the agent's exit, a
    request the forwarder's bridge read) wakes it, not its timeout."""
    threading.Timer(0.2, channel.post, args=(AgentExited(0, ""),)).start()
    started = time.monotonic()
    assert isinstance(channel.next_event(60), AgentExited)
    assert time.monotonic() - started < 30


def raw_request(channel: LLMChannel) -> socket.socket:
    """A connection that has sent one request (Chat Completions) and reads nothing yet."""
    body = json.dumps(CHAT).encode()
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.settimeout(10)
    raw.connect(str(channel.socket_path))
    raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + channel.token.encode()
                + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return raw


def answer_in_thread(channel: LLMChannel, content: str) -> threading.Thread:
    event = channel.next_event(10)
    assert isinstance(event, AgentRequest)
    payload, _ = respond(event.call.wire, event.call.body, {}, Reply(content=content), "m", {})
    answering = threading.Thread(target=event.call.answer, args=(200, payload))
    answering.start()
    return answering


def test_a_reply_larger_than_the_sockets_buffer_reaches_an_agent_that_reads_it_late(channel):
    raw = raw_request(channel)
    answering = answer_in_thread(channel, "x" * (8 << 20))
    time.sleep(0.5)  # the reply fills the socket's buffer and waits for the agent
    status, payload = read_response(raw)
    answering.join(10)
    assert status == 200 and json.loads(payload)["choices"][0]["message"]["content"] == "x" * (8 << 20)
    raw.close()


def test_a_reply_the_agent_never_reads_gives_up_after_the_read_timeout_and_ends_the_episode(channel):
    raw = raw_request(channel)
    answering = answer_in_thread(channel, "x" * (8 << 20))
    answering.join(10)  # the fixture's read_timeout is 1 s
    assert not answering.is_alive()
    event = channel.next_event(5)
    assert isinstance(event, ChannelError) and "read none of its reply for 1 s" in event.message
    raw.close()


def test_the_reaper_removes_channel_directories_of_dead_processes():
    script = ("import os, sys; from gymenvs.container.agent.channel import LLMChannel; c = LLMChannel(model_name='m'); "
              "print(c.directory, flush=True); os._exit(0)")  # exits without closing: the directory stays
    directory = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.isdir(directory)
    assert directory in reap_directories()
    assert not os.path.exists(directory)


# -- the responses the policy's replies become (the chat wire's responder) ------------------------------------------

REQUEST = {"model": "m", "messages": [{"role": "system", "content": "You fix bugs."}, {"role": "user", "content": "Fix it."}]}


@pytest.mark.parametrize("reply", [
    {"content": "I will look at the tests first."},
    {"content": None, "tool_calls": [ReplyCall("bash", json.dumps({"command": "pytest -x tests/"}))]},
], ids=["text", "tool call"])
def test_a_reply_is_an_openai_chat_completion_with_usage_counted_in_text_pieces(reply):
    """The policy gave no usage: the chat wire's response counts it in text pieces (`count_text_pieces`)."""
    payload, message = respond(chat_wire, REQUEST, REQUEST, Reply(**reply), "m", {})
    completion = ChatCompletion.model_validate(json.loads(json.dumps(payload)), strict=True)  # as it crosses the socket
    assert completion.choices[0].finish_reason == ("tool_calls" if reply.get("tool_calls") else "stop")
    assert completion.choices[0].message.model_dump(exclude_none=True) == {k: v for k, v in message.items() if v is not None}
    usage = completion.usage
    # "[ system ] You fix bugs ." and "[ user ] Fix it .": 7 + 6 pieces
    assert (usage.prompt_tokens, usage.total_tokens) == (13, usage.prompt_tokens + usage.completion_tokens)
    assert usage.completion_tokens == count_text_pieces(reply["content"] or 'bash {"command": "pytest -x tests/"}') > 0


def test_a_history_sent_again_is_counted_as_its_rendered_text_is():
    """The prompt's count is remembered per message, and an episode's (`PromptPieces`) from where its request first
    differs from the one before; it stays the count of the rendered history, as the history grows, is sent again or
    changes (a message edited in place, names, tool calls, text parts, a lone surrogate)."""
    history = [{"role": "system", "content": "You fix bugs. " * 40},
               {"role": "user", "content": [{"type": "text", "text": "Fix it."}, {"type": "text", "text": "\ud800 now"}]},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
               {"role": "tool", "name": "bash", "tool_call_id": "c1", "content": "a.py\nb.py"}]
    episode = PromptPieces()
    for length in (1, 2, 3, 4, 4, 2, 4):
        expected = count_text_pieces(render(history[:length]))
        assert count_rendered_pieces(history[:length]) == episode.count(history[:length]) == expected
    history[0] = {"role": "system", "content": "You fix bugs! " * 40}
    assert count_rendered_pieces(history) == episode.count(history) == count_text_pieces(render(history)) == 163 + 53
    assert episode.count(history[1:]) == 53 and episode.count([]) == 0  # 163 in the first


def test_usage_the_policy_counted_is_passed_on_unchanged():
    payload = chat_wire.response(Reply(content="ok", prompt_tokens=812, completion_tokens=3), REQUEST, "m")
    assert payload["usage"] == {"prompt_tokens": 812, "completion_tokens": 3, "total_tokens": 815}
