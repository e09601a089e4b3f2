"""The host end of the agent's forwarder: the connections it carries over its exec stream, bridged to the channel.

The forwarder (`forwarder.py`, in the container) runs as an engine exec session; each TCP connection the
agent makes to it arrives here as frames on that session's stream and is bridged to a connection of its
own to the episode's `LLMChannel` socket. Only the engine's API carries the bytes, so an engine on
another machine serves the agent as well as a local one. `ExecBridge.port` is where the agent reaches the
forwarder in its container, `ExecBridge.pid` the forwarder's pid there.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

from gymenvs.container.agent.forwarder import DATA, EOF, FRAME, OPEN, READY
from gymenvs.container.runtime import ExecProcess, Sandbox, SandboxError

_CHUNK = 1 << 16
_READY_TIMEOUT_S = 30.0


@dataclass
class _Connection:
    sock: socket.socket
    agent_done: threading.Event = field(default_factory=threading.Event)  # the forwarder sent its EOF


class ExecBridge:
    """Start `forwarder` (its path in the container) in `sandbox` after `setup` (a shell snippet, its output
    dropped) and bridge each connection it carries to the unix socket `channel_socket`; `SandboxError` if it
    does not report its port. Bridged to no channel (None) until `bind`, a connection is refused (closed)."""

    def __init__(self, sandbox: Sandbox, forwarder: str, channel_socket: str | None, *, setup: str = ""):
        self._channel_socket = channel_socket
        script = f"{{\n{setup}\n:\n}} </dev/null >/dev/null 2>&1; exec python3 {forwarder} 2>/dev/null"
        self._stream: ExecProcess = sandbox.open_exec(["bash", "-c", script], stdin=True)
        self._send_lock = threading.Lock()
        self._buffer = bytearray()
        self._connections: dict[int, _Connection] = {}
        self._stopped = threading.Event()
        try:
            port, pid = self._read_ready()
        except BaseException:
            self._stream.close()
            raise
        self.port, self.pid = port, pid
        self._thread = threading.Thread(target=self._serve, name="gymenvs-agent-bridge", daemon=True)
        self._thread.start()

    def bind(self, channel_socket: str) -> None:
        """Bridge the connections the agent opens from now on to `channel_socket`."""
        self._channel_socket = channel_socket

    def close(self) -> None:
        """Stop bridging and close every connection; the forwarder exits as its stdin closes. Safe to call twice."""
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

    def _send(self, kind: int, number: int, payload: bytes = b"") -> None:
        with self._send_lock:
            self._stream.send(FRAME.pack(kind, number, len(payload)) + payload)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            frame = self._next_frame()
            if frame is not None:
                self._dispatch(*frame)
                continue
            data = self._stream.read(time.monotonic() + 0.2)
            if data == b"":  # the forwarder is gone (killed, or its container): its connections went with it
                break
            if data:
                self._buffer += data
        self._end_connections()

    def _end_connections(self) -> None:
        """Wake each connection's pump, which closes it."""
        for connection in list(self._connections.values()):
            connection.agent_done.set()
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _dispatch(self, kind: int, number: int, payload: bytes) -> None:
        if kind == OPEN:
            self._open(number)
            return
        connection = self._connections.get(number)
        if connection is None:
            return
        try:
            if kind == DATA:
                connection.sock.sendall(payload)
            elif kind == EOF:
                connection.agent_done.set()
                connection.sock.shutdown(socket.SHUT_WR)
        except OSError:  # the channel dropped it (it is closing): its pump ends the connection
            pass

    # -- one connection --------------------------------------------------------------------------

    def _open(self, number: int) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self._channel_socket is None:
                raise ConnectionRefusedError("bridged to no channel yet")
            sock.connect(self._channel_socket)
        except OSError:  # no channel yet, or it is closed: the agent sees its connection end
            sock.close()
            self._send(EOF, number)
            return
        connection = self._connections[number] = _Connection(sock)
        threading.Thread(target=self._pump, args=(number, connection), name="gymenvs-agent-bridge-connection",
                         daemon=True).start()

    def _pump(self, number: int, connection: _Connection) -> None:
        """The channel's bytes on `connection` to the forwarder, then EOF; closed once the agent is done too."""
        try:
            while True:
                data = connection.sock.recv(_CHUNK)
                if not data:
                    break
                self._send(DATA, number, data)
        except OSError:
            pass
        self._send(EOF, number)
        connection.agent_done.wait()
        self._connections.pop(number, None)
        connection.sock.close()
