"""The host end of one episode's LLM channel: an HTTP endpoint on a unix socket speaking the three LLM wire formats.

Each episode gets its own directory on this host holding the socket, and its own token. The agent in its
container reaches the socket through the forwarder's exec stream (`gymenvs.container.agent.bridge`), never
through the container's files, so the engine need not share this host. The channel removes its directory
at `close()`, or when it is forgotten (at interpreter exit too); a killed process's directory goes to the
reaper (`gymenvs.container.reaper`). Its threads are daemon threads, so a program that never closes its
env still exits.
A request without the token (`Authorization: Bearer <token>` or `x-api-key: <token>`) is refused.
Each POST is read in its own wire format (`gymenvs.container.agent.wire`: Chat Completions, Responses,
Anthropic Messages) into the one internal form, and answered in that format, streamed when asked. The agent's
container has no network, so this socket is the only host service it can reach, and it reaches
only its own episode.

The agent may have one call in flight. Everything the episode loop needs arrives as an event on
`LLMChannel.events`: `AgentRequest` (a call waiting for its reply), `ChannelError` (a malformed,
unauthorised, concurrent or abandoned request: the episode ends) and `AgentExited` (posted by the
env's watcher of the agent process).
"""

from __future__ import annotations

import hmac
import http.server
import json
import queue
import shutil
import socketserver
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gymenvs.container.agent.wire import SIDE_MODEL, WireError, route, side_call_kind
from gymenvs.container.agent.wire import anthropic as anthropic_wire
from gymenvs.container.agent.wire import chat as chat_wire
from gymenvs.container.reaper import owned_directory

SOCKET_NAME = "llm.sock"
_DIRECTORY_KIND = "agent"
_MODEL_PATHS = frozenset({"/v1/models", "/models"})


@dataclass
class Call:
    """One request the agent is waiting on; `answer` releases it.

    `body` is the request in the internal form (`wire.common`), whatever `wire` the agent spoke;
    `raw` the body as sent; `side` why it is a side call (`wire.side_call_kind`), None for a main turn.
    `answer` takes the reply in the agent's own format, which the channel streams if the request asked.
    """

    body: dict[str, Any]
    wire: Any = chat_wire
    raw: dict[str, Any] | None = None
    side: str | None = None
    received_at: float = field(default_factory=time.monotonic)
    _reply: tuple[int, dict[str, Any]] | None = None
    _answered: threading.Event = field(default_factory=threading.Event)

    def answer(self, status: int, payload: dict[str, Any]) -> None:
        if not self._answered.is_set():
            self._reply = (status, payload)
            self._answered.set()

    def wait(self) -> tuple[int, dict[str, Any]]:
        self._answered.wait()
        assert self._reply is not None  # set before the event
        return self._reply


@dataclass
class AgentRequest:
    call: Call


@dataclass
class ChannelError:
    message: str
    #: The channel itself failed (else the agent broke its protocol: a malformed request, a wrong key...).
    infra: bool = False


@dataclass
class AgentExited:
    exit_code: int | None
    log_tail: str


def new_channel_directory() -> Path:
    """A new, empty channel directory owned by this process (the reaper removes it once the process is gone)."""
    return owned_directory(_DIRECTORY_KIND)


def new_token() -> str:
    """A fresh episode token (256 random bits)."""
    return uuid.uuid4().hex + uuid.uuid4().hex


class LLMChannel:
    """An episode's endpoint. `close()` releases any waiting call, joins every thread and removes the
    directory."""

    def __init__(self, *, model_name: str, max_request_bytes: int = 16 << 20, max_connections: int = 8,
                 read_timeout: float = 30.0, side_model: str = SIDE_MODEL, token: str | None = None):
        self.token = token or new_token()
        self.model_name = model_name
        self.side_model = side_model
        #: Each answered Responses call's conversation, by response id (`previous_response_id`).
        self.conversations: dict[str, list] = {}
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.events: queue.Queue = queue.Queue()
        self.directory = new_channel_directory()
        self.socket_path = self.directory / SOCKET_NAME
        self._lock = threading.Lock()
        self._pending: Call | None = None
        self._replying: set[Any] = set()  # connections whose call is taken and whose reply is not yet written
        self._closed = False
        self._server = _Server(str(self.socket_path), self)
        self._forget = weakref.finalize(self, shutil.rmtree, self.directory, ignore_errors=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), name="gymenvs-llm-channel", daemon=True)
        self._thread.start()

    def next_event(self, timeout: float) -> AgentRequest | ChannelError | AgentExited | None:
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def post(self, event: Any) -> None:
        self.events.put(event)

    def close(self) -> None:
        """Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.answer(503, pending.wire.error("the episode has ended", "episode_ended"))
        self._server.shutdown()
        with self._lock:  # a connection still writing its reply closes itself once written (`reply_written`)
            self._server.close_connections(except_for=self._replying)
        self._server.server_close()  # joins the connection threads
        self._thread.join()
        self._forget()  # removes the directory

    # -- called by the connection threads -------------------------------------------------------

    def begin_call(self, call: Call, connection: Any) -> Call | str:
        """The new call, arrived on `connection`, or why it cannot be taken."""
        with self._lock:
            if self._closed:
                return "the episode has ended"
            if self._pending is not None:
                return "a second request arrived while the first still waits for its reply (one call at a time)"
            self._pending = call
            self._replying.add(connection)
        self.post(AgentRequest(call))
        return call

    def reply_written(self, connection: Any) -> bool:
        """Whether `connection` must close now that its call's reply is written (the channel is closing)."""
        with self._lock:
            self._replying.discard(connection)
            return self._closed

    def end_call(self, call: Call) -> None:
        with self._lock:
            if self._pending is call:
                self._pending = None

    def fail(self, message: str, *, infra: bool = False) -> None:
        if not self._closed:
            self.post(ChannelError(message, infra))


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    # Daemon threads, joined by `server_close` all the same (block_on_close): a connection thread waiting on a
    # call no one will answer (an env never closed) must not hold the interpreter at exit.
    daemon_threads = True
    block_on_close = True

    def __init__(self, path: str, channel: LLMChannel):
        self.channel = channel
        self._connections: set = set()
        self._connections_lock = threading.Lock()
        super().__init__(path, _Handler)

    def verify_request(self, request, client_address) -> bool:
        with self._connections_lock:
            if len(self._connections) >= self.channel.max_connections:
                self.channel.fail(f"the agent opened more than {self.channel.max_connections} connections at once")
                return False
            self._connections.add(request)
        return True

    def shutdown_request(self, request) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        """A connection thread failed (the agent hung up mid-reply, say): that ends the episode, quietly."""
        import sys

        self.channel.fail(f"the channel failed while serving a request: {sys.exc_info()[1]!r}", infra=True)

    def close_connections(self, except_for: set[Any]) -> None:
        """Shut down the connections (waking their threads), but those in `except_for`: they are writing a
        reply, which gets `read_timeout` seconds to reach an agent that has stopped reading."""
        import socket

        with self._connections_lock:
            for connection in self._connections & except_for:
                try:
                    connection.settimeout(self.channel.read_timeout)
                except OSError:
                    pass
            for connection in self._connections - except_for:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gymenvs-agent-channel/1"
    # A buffered writer: a reply's headers and body leave in one write (`_write` flushes), so they cross the
    # bridge and the forwarder as one frame, not two.
    wbufsize = -1
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the env keeps its own records
        pass

    def address_string(self) -> str:
        return "agent"

    def handle_expect_100(self) -> bool:
        """`Expect: 100-continue` (curl's large POSTs): the interim reply must leave now, not wait in the buffer."""
        proceed = super().handle_expect_100()
        self.wfile.flush()
        return proceed

    def do_HEAD(self) -> None:
        """A reachability probe (Claude Code's `HEAD /api/hello`, sent without a key): answered, harmless."""
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        if not self._authorized():
            return
        model = self.server.channel.model_name
        if self.path.split("?")[0].rstrip("/") not in _MODEL_PATHS:
            self._send(404, chat_wire.error(f"no route GET {self.path}"))
        elif "anthropic-version" in self.headers:
            self._send(200, anthropic_wire.models(model))
        else:
            self._send(200, {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "gymenvs"}]})

    def do_POST(self) -> None:
        channel = self.server.channel
        if not self._authorized():
            return
        where = route(self.path)
        if where is None:
            self._send(404, chat_wire.error(f"no route POST {self.path}; the endpoints are /v1/chat/completions, "
                                            "/v1/responses, /v1/messages and /v1/messages/count_tokens"))
            channel.fail(f"the agent called POST {self.path}, which this channel does not serve")
            return
        call = self._read_call(where)
        if call is None:
            return
        taken = channel.begin_call(call, self.connection)
        if isinstance(taken, str):
            self._send(429, where.wire.error(taken))
            channel.fail(taken)
            return
        status, payload = call.wait()
        channel.end_call(call)
        try:
            if status == 200 and call.body.get("stream") and where.endpoint == "turn":
                self._write(200, where.wire.stream(payload, call.raw or call.body), "text/event-stream")
            else:
                self._send(status, payload)
        except OSError:
            channel.fail("the agent closed its connection before its reply was delivered")
        finally:
            if channel.reply_written(self.connection):
                self.close_connection = True

    def _authorized(self) -> bool:
        token = self.server.channel.token.encode()
        bearer = self.headers.get("Authorization", "").encode()
        api_key = self.headers.get("x-api-key", "").encode()
        if hmac.compare_digest(bearer, b"Bearer " + token) or hmac.compare_digest(api_key, token):
            return True
        self._send(401, chat_wire.error("missing or wrong API key: use the key this episode gave the agent"))
        self.server.channel.fail("the agent sent a request without the episode's API key")
        return False

    def _read_call(self, where: Any) -> Call | None:
        """The request as a `Call` in the internal form, or None once a malformed one is refused (the episode ends)."""
        channel = self.server.channel
        problem: tuple[int, str] | None = None
        call: Call | None = None
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            problem = (411, "a request body with a Content-Length is required")
        elif int(length) > channel.max_request_bytes:
            problem = (413, f"the request has {length} bytes, more than the {channel.max_request_bytes} allowed")
        if problem is None:
            self.connection.settimeout(channel.read_timeout)
            try:
                raw = self.rfile.read(int(length))
            except OSError:
                raw = b""
            finally:
                self.connection.settimeout(None)
            if len(raw) < int(length):
                problem = (408, f"the request body did not arrive within {channel.read_timeout:g} s")
            else:
                problem, call = self._parse(raw, where)
        if problem is not None:
            status, message = problem
            self.close_connection = True
            self._send(status, where.wire.error(message))
            channel.fail(f"malformed request: {message}")
            return None
        return call

    def _parse(self, raw: bytes, where: Any) -> tuple[tuple[int, str] | None, Call | None]:
        channel = self.server.channel
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return (400, f"the body is not JSON ({exc})"), None
        try:
            request = where.wire.request(body, channel.conversations)
        except WireError as exc:
            return (400, f"{where.wire.NAME} request: {exc}"), None
        side = side_call_kind(where.endpoint, self.headers, request, channel.side_model)
        return None, Call(request, wire=where.wire, raw=body, side=side)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        self._write(status, json.dumps(payload).encode(), "application/json")

    def _write(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
