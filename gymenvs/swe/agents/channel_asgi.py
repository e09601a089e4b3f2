"""Candidate for issue 18 point 4: the episode's channel served by uvicorn (a bare ASGI app) on the same unix socket.

Same interface and protocol as `channel.LLMChannel`; measured against it with
examples/benchmarks/agent_call_overhead.py --channel asgi.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from gymenvs.swe.agents.channel import _CHAT_PATHS, _DIR_PREFIX, _MODEL_PATHS, SOCKET_NAME, AgentRequest, ChannelError, _error, _parse_chat_body, stream_chunks
from gymenvs.swe.sandbox import process_start_time


@dataclass
class Call:
    """One chat-completions request the agent is waiting on; `answer` (from any thread) releases it."""

    body: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    received_at: float = field(default_factory=time.monotonic)
    _reply: asyncio.Future = field(init=False)
    _answered: bool = False

    def __post_init__(self) -> None:
        self._reply = self.loop.create_future()

    def answer(self, status: int, payload: dict[str, Any]) -> None:
        if not self._answered:
            self._answered = True
            self.loop.call_soon_threadsafe(_resolve, self._reply, (status, payload))


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


class LLMChannel:
    def __init__(self, *, model_name: str, max_request_bytes: int = 16 << 20, max_connections: int = 8,
                 read_timeout: float = 30.0, http: str = "h11"):
        self.token = uuid.uuid4().hex + uuid.uuid4().hex
        self.model_name = model_name
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.events: queue.Queue = queue.Queue()
        self.directory = Path(tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-{process_start_time(os.getpid())}-"))
        self.directory.chmod(0o755)
        self.socket_path = self.directory / SOCKET_NAME
        self._lock = threading.Lock()
        self._pending: Call | None = None
        self._closed = False
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(str(self.socket_path))
        self.socket_path.chmod(0o666)
        self._socket.listen(16)
        config = uvicorn.Config(self._app, http=http, loop="asyncio", lifespan="off", interface="asgi3", access_log=False, log_level="error",
                                timeout_keep_alive=3600, timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="gymenvs-llm-channel", daemon=True)
        self._thread.start()
        self._started.wait()

    def _serve(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._started.set()
            await self._server.serve(sockets=[self._socket])

        try:
            asyncio.run(serve())
        finally:
            self._started.set()

    def next_event(self, timeout: float) -> Any:
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def post(self, event: Any) -> None:
        self.events.put(event)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.answer(503, _error("the episode has ended"))
        self._server.should_exit = True
        self._thread.join()
        self._socket.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def fail(self, message: str) -> None:
        if not self._closed:
            self.post(ChannelError(message))

    def _begin_call(self, body: dict[str, Any]) -> Call | str:
        with self._lock:
            if self._closed:
                return "the episode has ended"
            if self._pending is not None:
                return "a second request arrived while the first still waits for its reply (one call at a time)"
            assert self._loop is not None
            self._pending = call = Call(body, self._loop)
        self.post(AgentRequest(call))
        return call

    def _end_call(self, call: Call) -> None:
        with self._lock:
            if self._pending is call:
                self._pending = None

    # -- the ASGI app ---------------------------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if len(self._server.server_state.connections) > self.max_connections:
            self.fail(f"the agent opened more than {self.max_connections} connections at once")
            await _send(send, 503, _error("too many connections"), close=True)
            return
        headers = dict(scope["headers"])
        if not hmac.compare_digest(headers.get(b"authorization", b""), f"Bearer {self.token}".encode()):
            await _send(send, 401, _error("missing or wrong API key: use the key this episode gave the agent"))
            self.fail("the agent sent a request without the episode's API key")
            return
        path = scope["path"].rstrip("/")
        if scope["method"] == "GET":
            if path in _MODEL_PATHS:
                model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "gymenvs"}
                await _send(send, 200, {"object": "list", "data": [model]})
            else:
                await _send(send, 404, _error(f"no route GET {scope['path']}"))
            return
        if scope["method"] != "POST" or path not in _CHAT_PATHS:
            await _send(send, 404, _error(f"no route {scope['method']} {scope['path']}; the endpoint is /v1/chat/completions"))
            return
        body = await self._read_request(headers, receive, send)
        if body is None:
            return
        call = self._begin_call(body)
        if isinstance(call, str):
            await _send(send, 429, _error(call))
            self.fail(call)
            return
        try:
            status, payload = await call._reply
        finally:
            self._end_call(call)
        if status == 200 and body.get("stream"):
            events = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in stream_chunks(payload))
            await _send_bytes(send, 200, events + b"data: [DONE]\n\n", b"text/event-stream")
        else:
            await _send(send, status, payload)

    async def _read_request(self, headers: dict[bytes, bytes], receive: Any, send: Any) -> dict[str, Any] | None:
        length = headers.get(b"content-length", b"").decode()
        problem = None
        body = None
        if not length.isdigit():
            problem = (411, "a request body with a Content-Length is required")
        elif int(length) > self.max_request_bytes:
            problem = (413, f"the request has {length} bytes, more than the {self.max_request_bytes} allowed")
        else:
            try:
                raw = await asyncio.wait_for(_read_body(receive), self.read_timeout)
            except asyncio.TimeoutError:
                raw = b""
            if len(raw) < int(length):
                problem = (408, f"the request body did not arrive within {self.read_timeout:g} s")
            else:
                problem, body = _parse_chat_body(raw)
        if problem is not None:
            status, message = problem
            await _send(send, status, _error(message), close=True)
            self.fail(f"malformed request: {message}")
            return None
        return body


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _send(send: Any, status: int, payload: dict[str, Any], close: bool = False) -> None:
    await _send_bytes(send, status, json.dumps(payload).encode(), b"application/json", close)


async def _send_bytes(send: Any, status: int, data: bytes, content_type: bytes, close: bool = False) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
