"""The host end of one episode's LLM channel: the agent's HTTP endpoint, speaking the three LLM wire formats.

Each episode gets its own directory on this host holding its unix socket, and its own token. An agent on this
host reaches the socket. An agent in its container reaches the channel on its own loopback, where this process
listens in the container's network namespace (`Sandbox.loopback_listener`, the channel's `listener`); where the
runtime cannot make that listener (its engine on another host), through the forwarder's exec stream
(`gymenvs.container.agent.bridge`). Never through the container's files, so the engine need not share this host.
Each of its connections, whichever way it came, is an `AgentConnection` (`gymenvs.container.agent.connection`:
the requests, their wire formats, the token). The channel removes its directory at `close()`, or when it is forgotten (at
interpreter exit too); a killed process's directory goes to the reaper (`gymenvs.container.reaper`). Its thread
is a daemon thread, so a program that never closes its env still exits. The agent's container has no network,
so this channel is the only host service it can reach, and it reaches only its own episode.

The agent may have one call in flight. Everything the episode loop needs arrives as an event on
`LLMChannel.events`: `AgentRequest` (a call waiting for its reply), `ChannelError` (a malformed,
unauthorised, concurrent or abandoned request: the episode ends) and `AgentExited` (posted by the
env's watcher of the agent process).
"""

from __future__ import annotations

import queue
import selectors
import shutil
import socket
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymenvs.container.agent.connection import AgentConnection, Call, Transport
from gymenvs.container.agent.messages import PromptPieces
from gymenvs.container.agent.wire import SIDE_MODEL
from gymenvs.container.reaper import owned_directory

SOCKET_NAME = "llm.sock"
_DIRECTORY_KIND = "agent"
_CHUNK = 1 << 16
_POLL_S = 0.1  # how often the socket's thread looks for a stalled request, or its stop


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
    """An episode's endpoint: its unix socket, and `listener` (a listening TCP socket: the agent's container's
    loopback), whose connections the channel's thread accepts from now on. `close()` answers a waiting call, ends
    every connection, joins its thread, closes both sockets and removes the directory."""

    def __init__(self, *, model_name: str, max_request_bytes: int = 16 << 20, max_connections: int = 8,
                 read_timeout: float = 30.0, side_model: str = SIDE_MODEL, token: str | None = None,
                 listener: socket.socket | None = None):
        self.token = token or new_token()
        self.model_name = model_name
        self.side_model = side_model
        #: Each answered Responses call's conversation, by response id (`previous_response_id`).
        self.conversations: dict[str, list] = {}
        #: The text pieces of the requests' messages, counted as each call is answered (`Reply.prompt_tokens`).
        self.prompt_pieces = PromptPieces()
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.events: queue.SimpleQueue = queue.SimpleQueue()  # the C queue: its hand-off costs a fraction of Queue's
        self.directory = new_channel_directory()
        self.socket_path = self.directory / SOCKET_NAME
        self._lock = threading.Lock()
        self._pending: Call | None = None
        self._connections: set[AgentConnection] = set()
        self._closed = False
        self._listener = _SocketListener(str(self.socket_path), self, listener)
        self._forget = weakref.finalize(self, shutil.rmtree, self.directory, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def next_event(self, timeout: float) -> AgentRequest | ChannelError | AgentExited | None:
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def post(self, event: Any) -> None:
        self.events.put(event)

    def connect(self, transport: Transport) -> AgentConnection | None:
        """A new connection of the agent over `transport`, or None when it is refused (the channel is closed, or
        the agent has `max_connections` open)."""
        with self._lock:
            if self._closed:
                return None
            if len(self._connections) < self.max_connections:
                connection = AgentConnection(self, transport)
                self._connections.add(connection)
                return connection
        self.fail(f"the agent opened more than {self.max_connections} connections at once")
        return None

    def close(self) -> None:
        """Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, None
        if pending is not None:  # its reply goes out before the connection ends
            pending.answer(503, pending.wire.error("the episode has ended", "episode_ended"))
        for connection in list(self._connections):
            connection.close()
        self._listener.close()
        self._forget()  # removes the directory

    # -- called by the connections ----------------------------------------------------------------

    def begin_call(self, call: Call) -> str | None:
        """Post the new call to the episode, or say why it cannot be taken."""
        with self._lock:
            if self._closed:
                return "the episode has ended"
            if self._pending is not None:
                return "a second request arrived while the first still waits for its reply (one call at a time)"
            self._pending = call
        self.post(AgentRequest(call))
        return None

    def end_call(self, call: Call) -> None:
        with self._lock:
            if self._pending is call:
                self._pending = None

    def disconnect(self, connection: AgentConnection) -> None:
        with self._lock:
            self._connections.discard(connection)

    def fail(self, message: str, *, infra: bool = False) -> None:
        if not self._closed:
            self.post(ChannelError(message, infra))


class _SocketTransport:
    """A connection accepted on the channel's unix socket. Its timeout (`read_timeout`) bounds a reply's write to an
    agent that has stopped reading."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reading = True  # the listener's thread reads it (and closes it once the agent's end arrives)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        try:  # wakes the listener's thread, which closes the socket
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if not self.reading:  # the agent's end came first: no thread will close it
            self.sock.close()


class _SocketListener:
    """The channel's unix socket, for an agent on this host, and `also` (a TCP listener: the agent's in its container):
    one thread accepts their connections and reads them all."""

    def __init__(self, path: str, channel: LLMChannel, also: socket.socket | None):
        self._channel = channel
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(path)
        unix.listen(16)
        self._selector = selectors.DefaultSelector()
        for listener in (unix, also) if also is not None else (unix,):
            self._selector.register(listener, selectors.EVENT_READ)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="gymenvs-llm-channel", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _serve(self) -> None:
        try:
            while not self._stopped.is_set():
                for key, _ in self._selector.select(_POLL_S):
                    if key.data is None:
                        self._accept(key.fileobj)  # type: ignore[arg-type]
                    else:
                        self._read(key.fileobj, key.data)  # type: ignore[arg-type]
                now = time.monotonic()
                for key in list(self._selector.get_map().values()):
                    if key.data is not None:
                        key.data.expire(now)
        finally:
            for key in list(self._selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            self._selector.close()

    def _accept(self, listener: socket.socket) -> None:
        sock, _ = listener.accept()
        if sock.family == socket.AF_INET:  # a request's last piece, or a reply, leaves at once
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self._channel.read_timeout)
        connection = self._channel.connect(_SocketTransport(sock))
        if connection is None:
            sock.close()
        else:
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _read(self, sock: socket.socket, connection: AgentConnection) -> None:
        try:
            data = sock.recv(_CHUNK)
        except OSError:  # reset by the agent
            data = b""
        if not data:  # the agent's end (or ours): a reply still waiting may go out on a half-closed socket
            self._selector.unregister(sock)
            transport: _SocketTransport = connection.transport  # type: ignore[assignment]
            transport.reading = False
            if connection.closed:
                sock.close()
        connection.receive(data)
