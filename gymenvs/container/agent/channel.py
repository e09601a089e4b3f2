"""The host end of one episode's LLM channel: the agent's HTTP endpoint, speaking the three LLM wire formats.

Each episode gets its own directory on this host holding its unix socket, and its own token. An agent on this
host reaches the socket. An agent in its container reaches the channel on its own loopback, where this process
listens in the container's network namespace (`Sandbox.loopback_listener`, the channel's `listener`); where the
runtime cannot make that listener (its engine on another host), through the forwarder's exec stream
(`gymenvs.container.agent.bridge`). Never through the container's files, so the engine need not share this host.
Each of its connections, whichever way it came, is an `AgentConnection` (`gymenvs.container.agent.connection`:
the requests, their wire formats, the token). The thread waiting for the channel's next event reads its sockets, a
daemon thread while none waits (`gymenvs.container.agent.sockets`), so a program that never closes its env still
exits. The channel removes its directory at `close()`, or when it is forgotten (at interpreter exit too); a killed
process's directory goes to the reaper (`gymenvs.container.reaper`). The agent's container has no network,
so this channel is the only host service it can reach, and it reaches only its own episode.

The agent may have one call in flight. Everything the episode loop needs arrives as an event on
`LLMChannel.events`: `AgentRequest` (a call waiting for its reply), `ChannelError` (a malformed,
unauthorised, concurrent or abandoned request: the episode ends) and `AgentExited` (posted by the
env's watcher of the agent process).
"""

from __future__ import annotations

import queue
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
from gymenvs.container.agent.sockets import ChannelSockets
from gymenvs.container.agent.wire import SIDE_MODEL
from gymenvs.container.reaper import owned_directory

SOCKET_NAME = "llm.sock"
_DIRECTORY_KIND = "agent"


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
    loopback), whose connections are accepted from now on (`next_event`'s caller serves them while it waits). `close()`
    answers a waiting call, ends every connection, joins the sockets' thread, closes them and removes the directory."""

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
        self._sockets = ChannelSockets(str(self.socket_path), self.connect, read_timeout=read_timeout, also=listener)
        self._forget = weakref.finalize(self, shutil.rmtree, self.directory, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def next_event(self, timeout: float) -> AgentRequest | ChannelError | AgentExited | None:
        """The next event, or None after `timeout` seconds; the calling thread serves the channel's sockets
        meanwhile (`gymenvs.container.agent.sockets`)."""
        return self._sockets.wait(self.events, time.monotonic() + max(0.0, timeout))

    def post(self, event: Any) -> None:
        self.events.put(event)
        self._sockets.nudge()

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
        self._sockets.close()
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
