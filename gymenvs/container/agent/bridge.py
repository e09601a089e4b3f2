"""The host end of the agent's forwarder: the connections it carries over its exec stream, served by the channel.

The forwarder (`forwarder.py`, in the container) runs as an engine exec session; each TCP connection the
agent makes to it arrives here as frames on that session's stream, and becomes a connection of the episode's
`LLMChannel` (`LLMChannel.connect`): this bridge's thread hands it the agent's bytes as they come, and its
replies go back as frames from the thread that answers. Only the engine's API carries the bytes, so an engine
on another machine serves the agent as well as a local one. `ExecBridge.port` is where the agent reaches the
forwarder in its container, `ExecBridge.pid` the forwarder's pid there.
"""

from __future__ import annotations

import threading
import time

from gymenvs.container.agent.channel import LLMChannel
from gymenvs.container.agent.connection import AgentConnection
from gymenvs.container.agent.forwarder import DATA, EOF, FRAME, OPEN, READY
from gymenvs.container.runtime import ExecProcess, Sandbox, SandboxError

_READY_TIMEOUT_S = 30.0
_EXPIRY_CHECK_S = 0.1  # how often a stalled request is looked for


class ExecBridge:
    """Start `forwarder` (its path in the container) in `sandbox` after `setup` (a shell snippet, its output
    dropped) and serve each connection it carries from `channel`; `SandboxError` if it does not report its port.
    Bridged to no channel (None) until `bind`, a connection is refused (closed)."""

    def __init__(self, sandbox: Sandbox, forwarder: str, channel: LLMChannel | None, *, setup: str = ""):
        self._channel = channel
        script = f"{{\n{setup}\n:\n}} </dev/null >/dev/null 2>&1; exec python3 {forwarder} 2>/dev/null"
        self._stream: ExecProcess = sandbox.open_exec(["bash", "-c", script], stdin=True)
        self._send_lock = threading.Lock()
        self._buffer = bytearray()
        self._connections: dict[int, AgentConnection] = {}
        self._next_expiry_check = 0.0
        self._stopped = threading.Event()
        try:
            port, pid = self._read_ready()
        except BaseException:
            self._stream.close()
            raise
        self.port, self.pid = port, pid
        self._thread = threading.Thread(target=self._serve, name="gymenvs-agent-bridge", daemon=True)
        self._thread.start()

    def bind(self, channel: LLMChannel) -> None:
        """Serve the connections the agent opens from now on from `channel`."""
        self._channel = channel

    def close(self) -> None:
        """Stop bridging and end every connection; the forwarder exits as its stdin closes. Safe to call twice."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._stream.close()
        self._end_connections()

    # -- the stream ------------------------------------------------------------------------------

    def _read_ready(self) -> tuple[int, int]:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:
            frame = self._next_frame()
            if frame is not None:
                kind, _, payload = frame
                port, pid = payload.split() if kind == READY else (b"", b"")
                if not (port.isdigit() and pid.isdigit()):
                    raise SandboxError(f"the agent's forwarder sent {bytes(payload[:200])!r} instead of its port")
                return int(port), int(pid)
            data = self._stream.read(deadline)
            if not data:
                raise SandboxError(f"the agent's forwarder did not start within {_READY_TIMEOUT_S:g} s "
                                   "(python3 missing from the image?)" if data is None else
                                   "the agent's forwarder exited before reporting its port (is python3 >= 3.6 in the image?)")
            self._buffer += data

    def _next_frame(self) -> tuple[int, int, bytes] | None:
        if len(self._buffer) < FRAME.size:
            return None
        kind, number, size = FRAME.unpack_from(self._buffer)
        if len(self._buffer) < FRAME.size + size:
            return None
        payload = bytes(self._buffer[FRAME.size: FRAME.size + size])
        del self._buffer[: FRAME.size + size]
        return kind, number, payload

    def send_frame(self, kind: int, number: int, payload: bytes = b"") -> None:
        with self._send_lock:
            self._stream.send(FRAME.pack(kind, number, len(payload)) + payload)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            frame = self._next_frame()
            if frame is not None:
                self._dispatch(*frame)
            else:
                data = self._stream.read(time.monotonic() + 0.2)
                if data == b"":  # the forwarder is gone (killed, or its container): its connections went with it
                    break
                if data:
                    self._buffer += data
            self._expire_stalled()
        self._end_connections()

    def _expire_stalled(self) -> None:
        now = time.monotonic()
        if now >= self._next_expiry_check:
            self._next_expiry_check = now + _EXPIRY_CHECK_S
            for connection in list(self._connections.values()):
                connection.expire(now)

    def _end_connections(self) -> None:
        """The agent's end of each connection: its forwarder is gone."""
        while self._connections:
            _, connection = self._connections.popitem()
            connection.receive(b"")

    def _dispatch(self, kind: int, number: int, payload: bytes) -> None:
        if kind == OPEN:
            self._open(number)
        elif kind == DATA and number in self._connections:
            self._connections[number].receive(payload)
        elif kind == EOF and number in self._connections:
            self._connections.pop(number).receive(b"")

    def _open(self, number: int) -> None:
        connection = self._channel.connect(_Frames(self, number)) if self._channel is not None else None
        if connection is None:  # no channel yet, or it is closed: the agent sees its connection end
            self.send_frame(EOF, number)
        else:
            self._connections[number] = connection


class _Frames:
    """One connection's replies, as frames on the bridge's stream."""

    def __init__(self, bridge: ExecBridge, number: int):
        self._bridge, self._number = bridge, number
        self._closed = False

    def send(self, data: bytes) -> None:
        self._bridge.send_frame(DATA, self._number, data)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._bridge.send_frame(EOF, self._number)
