"""The in-container end of an agent's LLM channel (stdlib only, any python3 >= 3.6).

    python3 forwarder.py

Listens on 127.0.0.1 (a free port) and carries every TCP connection made to it, byte for byte, over its own
stdin and stdout: the stream of the engine exec session that started it, whose other end is the host's
`gymenvs.container.agent.bridge`. So the agent reaches the episode's HTTP endpoint with no host path, socket
or network in its container (network_mode "none"), whether the engine runs on this host or not.

Both directions are a sequence of frames: a header (`FRAME`: kind, connection number, payload length)
and the payload. The forwarder first sends `READY` with "PORT PID"; then `OPEN` for each accepted
connection, `DATA` for its bytes, and `EOF` when it has no more to send (a half-close: the other
direction goes on); the host answers with `DATA` and `EOF` of its own. The forwarder exits when its
stdin closes.
"""

import os
import socket
import struct
import sys
import threading

FRAME = struct.Struct(">BII")
READY, OPEN, DATA, EOF = 1, 2, 3, 4
_CHUNK = 65536


class Frames:
    """The framed stream on this process's stdout: one writer at a time."""

    def __init__(self, fd):
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, kind, number, payload=b""):
        data = FRAME.pack(kind, number, len(payload)) + payload
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]


def read_exactly(fd, size):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Connection:
    def __init__(self, sock):
        self.sock = sock
        self.host_done = threading.Event()  # the host sent its EOF (or went away)


def upstream(connection, number, frames, connections):
    """Copy what the agent sends on `connection` into DATA frames, then EOF; close it once the host is done too."""
    try:
        while True:
            data = connection.sock.recv(_CHUNK)
            if not data:
                break
            frames.send(DATA, number, data)
    except OSError:
        pass
    frames.send(EOF, number)
    connection.host_done.wait()
    connections.pop(number, None)
    connection.sock.close()


def accept(listener, frames, connections):
    number = 0
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        number += 1
        connection = connections[number] = Connection(sock)
        frames.send(OPEN, number)
        threading.Thread(target=upstream, args=(connection, number, frames, connections), daemon=True).start()


def downstream(fd, connections):
    """Deliver the host's frames to their connections until stdin closes."""
    while True:
        header = read_exactly(fd, FRAME.size)
        if header is None:
            return
        kind, number, size = FRAME.unpack(header)
        payload = read_exactly(fd, size) if size else b""
        if payload is None:
            return
        connection = connections.get(number)
        if connection is None:
            continue
        try:
            if kind == DATA:
                connection.sock.sendall(payload)
            elif kind == EOF:
                connection.host_done.set()
                connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    frames, connections = Frames(sys.stdout.fileno()), {}
    frames.send(READY, 0, f"{listener.getsockname()[1]} {os.getpid()}".encode())
    threading.Thread(target=accept, args=(listener, frames, connections), daemon=True).start()
    downstream(sys.stdin.fileno(), connections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
