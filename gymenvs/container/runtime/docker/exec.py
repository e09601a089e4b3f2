"""A process started with `docker exec`, read with a deadline.

The docker SDK's `exec_run` has no timeout, so a process is started with `exec_create` and
`exec_start(socket=True)`, and its raw socket is read here with `select`: the caller's deadline is the
host-side watchdog, while an in-container `timeout -k` stops the process itself.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from typing import Any

_FRAME_HEADER = struct.Struct(">BxxxL")


class ExecStream:
    """A process started with `docker exec`: write its stdin, read its merged stdout/stderr with a deadline."""

    def __init__(self, api: Any, container_id: str, command: list[str], *, stdin: bool = False,
                 environment: dict[str, str] | None = None, workdir: str | None = None):
        self._api = api
        self.exec_id = api.exec_create(container_id, command, stdin=stdin, stdout=True, stderr=True,
                                       environment=environment, workdir=workdir)["Id"]
        self._raw = api.exec_start(self.exec_id, socket=True)  # holds the HTTP response alive
        self._socket = _as_socket(self._raw)
        self._buffer = bytearray()
        self._frame_left = 0
        self.eof = False

    def send(self, data: bytes) -> None:
        try:
            self._socket.sendall(data)
        except OSError:
            self.eof = True

    def read(self, deadline: float) -> bytes | None:
        """The next output bytes; `b""` once the process has closed its output; `None` at the deadline."""
        while True:
            data = self._take_payload()
            if data or self.eof:
                return data
            chunk = self._recv(deadline)
            if chunk is None:
                return None
            if chunk:
                self._buffer += chunk
            else:
                self.eof = True

    def closed(self) -> bool:
        """Whether the process has closed its output (it exited, or its container stopped); never blocks."""
        if not self.eof and select.select([self._socket], [], [], 0)[0]:
            chunk = self._recv(time.monotonic())
            if chunk:
                self._buffer += chunk
            else:
                self.eof = True
        return self.eof

    def exit_code(self) -> int | None:
        """The process's exit code, or None while it runs."""
        try:
            return self._api.exec_inspect(self.exec_id)["ExitCode"]
        except Exception:  # the container is gone: there is no exit code to read
            return None

    def close(self) -> None:
        for closable in (self._socket, self._raw):
            try:
                closable.close()
            except OSError:
                pass

    def _recv(self, deadline: float) -> bytes | None:
        pending = getattr(self._socket, "pending", None)  # TLS sockets buffer data select() cannot see
        if not (pending and pending()):
            ready, _, _ = select.select([self._socket], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
        try:
            return self._socket.recv(1 << 16)
        except OSError:  # reset by the engine: the stream is over
            return b""

    def _take_payload(self) -> bytes:
        """Strip Docker's 8-byte stream headers (the exec runs without a TTY) from the buffered bytes."""
        payload = bytearray()
        while self._buffer:
            if self._frame_left == 0:
                if len(self._buffer) < _FRAME_HEADER.size:
                    break
                _, self._frame_left = _FRAME_HEADER.unpack_from(self._buffer)
                del self._buffer[: _FRAME_HEADER.size]
                continue
            size = min(self._frame_left, len(self._buffer))
            payload += self._buffer[:size]
            del self._buffer[:size]
            self._frame_left -= size
        return bytes(payload)


def _as_socket(raw: Any) -> socket.socket:
    """The socket under what `exec_start(socket=True)` returns: a socket already (TLS), or a file object
    over one (a unix or TCP engine), whose descriptor is duplicated into a socket of our own."""
    if isinstance(raw, socket.socket):
        return raw
    return socket.socket(fileno=os.dup(raw.fileno()))
