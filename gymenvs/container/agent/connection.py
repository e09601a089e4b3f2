"""One HTTP/1.1 connection of an agent to its episode's channel, whatever carries its bytes.

A channel serves its agent over two transports: its unix socket (an agent on this host) and the forwarder's
exec stream (`gymenvs.container.agent.bridge`: an agent in its container). Each hands what the agent sends to
the connection's `receive` from its one reader thread; httptools (llhttp, compiled) reads the requests out of
those bytes, in whatever pieces they arrive. A request the channel answers at once (a probe, a refusal) is answered from that
thread; a call goes to the episode as a `Call`, and its reply leaves from the thread that answers it (the
env's), straight onto the transport, in one write: no thread waits for a call. A reply is always one whole
body with its length, so it is written here.

Each POST is read in its own wire format (`gymenvs.container.agent.wire`: Chat Completions, Responses,
Anthropic Messages) into the one internal form, and answered in that format, streamed when asked.
A request without the token (`Authorization: Bearer <token>` or `x-api-key: <token>`) is refused.
"""

from __future__ import annotations

import hmac
import http
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import lru_cache
from typing import Any, Protocol

import httptools
import orjson

from gymenvs.container.agent.wire import WireError, route, side_call_kind
from gymenvs.container.agent.wire import anthropic as anthropic_wire
from gymenvs.container.agent.wire import chat as chat_wire

_SERVER = "gymenvs-agent-channel/1"
_MODEL_PATHS = frozenset({"/v1/models", "/models"})
_JSON = "application/json"
_EVENT_STREAM = "text/event-stream"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


@dataclass
class Call:
    """One request the agent is waiting on; `answer` sends its reply (once).

    `body` is the request in the internal form (`wire.common`), whatever `wire` the agent spoke;
    `raw` the body as sent; `side` why it is a side call (`wire.side_call_kind`), None for a main turn.
    `answer` takes the reply in the agent's own format, which goes out streamed if the request asked.
    """

    body: dict[str, Any]
    wire: Any = chat_wire
    raw: dict[str, Any] | None = None
    side: str | None = None
    endpoint: str = "turn"
    received_at: float = field(default_factory=time.monotonic)
    _deliver: Any = None  # the connection's delivery of the reply: (call, status, payload)
    _answered: bool = False

    def answer(self, status: int, payload: dict[str, Any]) -> None:
        if not self._answered:
            self._answered = True
            if self._deliver is not None:
                self._deliver(self, status, payload)

    @property
    def streams(self) -> bool:
        """Whether its successful reply goes out as server-sent events."""
        return bool(self.body.get("stream")) and self.endpoint == "turn"


class Transport(Protocol):
    """What carries one connection's bytes to the agent."""

    def send(self, data: bytes) -> None:
        """All of `data`, in order; `OSError` if it cannot be delivered."""
        ...

    def close(self) -> None:
        """End the connection (the agent sees its end); safe to call twice."""
        ...


class ChannelLike(Protocol):
    """What a connection needs of its channel (`gymenvs.container.agent.channel.LLMChannel`)."""

    token: str
    model_name: str
    side_model: str
    conversations: dict[str, list]
    max_request_bytes: int
    read_timeout: float

    @property
    def closed(self) -> bool: ...

    def begin_call(self, call: Call) -> str | None: ...

    def end_call(self, call: Call) -> None: ...

    def fail(self, message: str, *, infra: bool = False) -> None: ...

    def disconnect(self, connection: AgentConnection) -> None: ...


@dataclass
class _Request:
    """One request as the parser reads it, from its first byte to its last."""

    began: float = field(default_factory=time.monotonic)
    target: bytearray = field(default_factory=bytearray)
    headers: dict[str, str] = field(default_factory=dict)  # by lowercase name
    body: bytearray = field(default_factory=bytearray)
    method: str = ""
    keep_alive: bool = False  # HTTP/1.1 without `Connection: close`: the connection goes on after its reply
    continues: bool = False  # it awaits `100 Continue` before sending its body
    whole: bool = False  # its last byte arrived
    refusal: tuple[int, str] | None = None  # why it is refused when its turn comes (its body is not kept)

    @property
    def path(self) -> str:
        return self.target.decode("latin-1")


class AgentConnection:
    """One connection of the agent, read by httptools; `receive` from one reader thread, replies from any thread.

    The parser reads all it is given, so requests the agent sends on while a call is out wait in `_requests`, in
    order, and are served one at a time, each after the reply before it (pipelining, as HTTP/1.1 orders it).
    """

    def __init__(self, channel: ChannelLike, transport: Transport):
        self._channel = channel
        self.transport = transport
        self._parser = httptools.HttpRequestParser(self)  # calls the on_* methods below from `feed_data`
        self._lock = threading.Lock()  # the reader's thread and the answering thread share the state below
        self._requests: deque[_Request] = deque()  # read or being read, not yet served; the last may be partial
        self._ended = False  # the agent will send no more
        self._calling = False  # a call is out: its reply comes from the answering thread, before any next request
        self._keep_alive = False  # the request being answered lets the connection go on after its reply
        self.closed = False

    def receive(self, data: bytes) -> None:
        """What the agent sent; `b""` once it will send no more."""
        with self._lock:
            if self.closed:
                return
            try:
                if not data:
                    self._ended = True
                elif not (self._requests and self._requests[-1].refusal):  # after a refusal, nothing more is read
                    self._feed(data)
                self._serve()
            except OSError:  # the agent is gone while a reply was going out
                self._end()
            except Exception as exc:  # noqa: BLE001 - this is the reader thread's edge: the episode ends, quietly
                self._channel.fail(f"the channel failed while serving a request: {exc!r}", infra=True)
                self._end()

    def expire(self, now: float) -> None:
        """Refuse a request whose bytes stopped arriving `read_timeout` seconds ago or more."""
        with self._lock:
            timeout = self._channel.read_timeout
            request = self._requests[0] if self._requests else None
            if (request is not None and not request.whole and not self._calling and not self.closed
                    and now - request.began >= timeout):
                self._refuse(408, f"the request body did not arrive within {timeout:g} s", route(request.path))

    def close(self) -> None:
        """End the connection; safe to call twice, from any thread."""
        self.closed = True
        self.transport.close()
        self._channel.disconnect(self)

    # -- reading: the parser's callbacks, from `_feed` ---------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            if not self._requests or self._requests[-1].whole:
                self._requests.append(_Request())
            self._requests[-1].target.clear()  # answered in Chat Completions' format, whatever its path
            self._requests[-1].refusal = (400, f"the request is not valid HTTP/1.1 ({exc or type(exc).__name__})")

    def on_message_begin(self) -> None:
        self._requests.append(_Request())

    def on_url(self, url: bytes) -> None:
        self._requests[-1].target += url  # in pieces when the request line arrives in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        self._requests[-1].headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        request, limit = self._requests[-1], self._channel.max_request_bytes
        request.method = self._parser.get_method().decode("latin-1")
        http11 = self._parser.get_http_version() == "1.1"
        request.keep_alive = http11 and "close" not in request.headers.get("connection", "").lower()
        request.continues = http11 and request.headers.get("expect", "").lower() == "100-continue"
        length = request.headers.get("content-length")
        if length is not None and int(length) > limit:
            request.refusal = (413, f"the request has {length} bytes, more than the {limit} allowed")

    def on_body(self, data: bytes) -> None:
        request, limit = self._requests[-1], self._channel.max_request_bytes
        request.continues = False
        if request.refusal is None:
            request.body += data
            if len(request.body) > limit:
                request.refusal = (413, f"the request has more than the {limit} bytes allowed")

    def on_message_complete(self) -> None:
        self._requests[-1].whole = True

    def _serve(self) -> None:
        """Serve the requests read whole, in order, until a call is out; end the connection once all is served."""
        while self._requests and not self._calling and not self.closed:
            request = self._requests[0]
            if request.refusal is not None:
                self._refuse(*request.refusal, route(request.path))
            elif not request.whole:
                if request.continues:  # curl's large POSTs: the body follows this answer
                    request.continues = False
                    self.transport.send(_CONTINUE)
                break
            else:
                self._requests.popleft()
                self._handle(request)
        if self._ended and not self._calling and not self.closed:
            if self._requests:
                self._refuse(400, "the agent closed its connection in the middle of a request", None)
            else:
                self._end()

    # -- answering ------------------------------------------------------------------------------

    def _handle(self, request: _Request) -> None:
        path, headers, method = request.path, request.headers, request.method
        self._keep_alive = request.keep_alive
        if method == "POST" and "content-length" not in headers and "transfer-encoding" not in headers:
            self._refuse(411, "a request body with a Content-Length is required", route(path))
        elif method == "HEAD":  # a reachability probe (Claude Code's `HEAD /api/hello`, sent without a key)
            self._respond(200, b"", None)
        elif not self._authorized(headers):
            self._send(401, chat_wire.error("missing or wrong API key: use the key this episode gave the agent"))
            self._channel.fail("the agent sent a request without the episode's API key")
        elif method == "GET":
            self._send(*self._models(path, headers))
        elif method != "POST":
            self._send(501, chat_wire.error(f"unsupported method {method}"))
        else:
            self._post(path, headers, bytes(request.body))

    def _authorized(self, headers: dict[str, str]) -> bool:
        token = self._channel.token.encode()
        bearer = headers.get("authorization", "").encode("latin-1")
        api_key = headers.get("x-api-key", "").encode("latin-1")
        return hmac.compare_digest(bearer, b"Bearer " + token) or hmac.compare_digest(api_key, token)

    def _models(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        model = self._channel.model_name
        if path.split("?")[0].rstrip("/") not in _MODEL_PATHS:
            return 404, chat_wire.error(f"no route GET {path}")
        if "anthropic-version" in headers:
            return 200, anthropic_wire.models(model)
        return 200, {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "gymenvs"}]}

    def _post(self, path: str, headers: dict[str, str], body: bytes) -> None:
        where = route(path)
        if where is None:
            self._send(404, chat_wire.error(f"no route POST {path}; the endpoints are /v1/chat/completions, "
                                            "/v1/responses, /v1/messages and /v1/messages/count_tokens"))
            self._channel.fail(f"the agent called POST {path}, which this channel does not serve")
            return
        call = self._call(where, headers, body)
        if isinstance(call, str):
            self._refuse(400, call, where)
            return
        self._calling = True
        refused = self._channel.begin_call(call)
        if refused is not None:
            self._calling = False
            self._send(429, where.wire.error(refused))
            self._channel.fail(refused)

    def _call(self, where: Any, headers: dict[str, str], body: bytes) -> Call | str:
        """The request as a `Call` in the internal form, or why it cannot be read."""
        try:
            raw = orjson.loads(body)
        except ValueError as exc:  # orjson's error is a JSONDecodeError, as json's; nesting past 1024 levels too
            return f"the body is not JSON ({exc})"
        try:
            request = where.wire.request(raw, self._channel.conversations)
        except WireError as exc:
            return f"{where.wire.NAME} request: {exc}"
        side = side_call_kind(where.endpoint, headers, request, self._channel.side_model)
        return Call(request, wire=where.wire, raw=raw, side=side, endpoint=where.endpoint, _deliver=self._deliver)

    def _deliver(self, call: Call, status: int, payload: dict[str, Any]) -> None:
        """`call`'s reply, from the answering thread."""
        with self._lock:
            self._channel.end_call(call)
            self._calling = False
            if self.closed:
                return
            try:
                if status == 200 and call.streams:
                    self._respond(200, call.wire.stream(payload, call.raw or call.body), _EVENT_STREAM)
                else:
                    self._send(status, payload)
                self._serve()  # the requests the agent sent on meanwhile
            except TimeoutError as exc:  # the agent stopped reading
                self._channel.fail(f"the reply was not delivered: {exc}")
                self._end()
            except OSError:
                self._channel.fail("the agent closed its connection before its reply was delivered")
                self._end()
            except Exception as exc:  # noqa: BLE001 - as a reader thread's: the episode ends, the env goes on
                self._channel.fail(f"the channel failed while replying: {exc!r}", infra=True)
                self._end()

    def _refuse(self, status: int, message: str, where: Any) -> None:
        """Answer a malformed request in its format (or Chat Completions'), end the episode and the connection."""
        wire = where.wire if where is not None else chat_wire
        self._send(status, wire.error(message), close=True)
        self._channel.fail(f"malformed request: {message}")

    def _send(self, status: int, payload: dict[str, Any], *, close: bool = False) -> None:
        self._respond(status, orjson.dumps(payload), _JSON, close=close)

    def _respond(self, status: int, data: bytes, content_type: str | None, *, close: bool = False) -> None:
        """One reply, in one write; then the connection ends (when asked, when the request asked, once the channel
        is closed) or reads the next request."""
        close = close or self._channel.closed or not self._keep_alive
        head = f"{_status_line(status)}\r\nServer: {_SERVER}\r\nDate: {_http_date(int(time.time()))}\r\n"
        if content_type is not None:
            head += f"Content-Type: {content_type}\r\n"
        head += f"Content-Length: {len(data)}\r\n"
        if close:
            head += "Connection: close\r\n"
        self.transport.send(f"{head}\r\n".encode("latin-1") + data)
        if close:
            self._end()

    def _end(self) -> None:
        self._requests.clear()
        self.close()


@lru_cache(maxsize=64)
def _status_line(status: int) -> str:
    return f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"


@lru_cache(maxsize=1)
def _http_date(second: int) -> str:
    """The `Date` header's value for `second` (epoch seconds): formatted once a second, not once a reply."""
    return formatdate(second, usegmt=True)
