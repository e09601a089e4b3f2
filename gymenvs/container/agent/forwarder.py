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
stdin closes. One thread does it all, woken by `selectors` when the host or a connection has bytes.
"""

import os
import selectors
import socket
import struct
import sys

FRAME = struct.Struct(">BII")
READY, OPEN, DATA, EOF = 1, 2, 3, 4
_CHUNK = 65536


def send_frame(fd, kind, number, payload=b""):
    view = memoryview(FRAME.pack(kind, number, len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


class Connection:
    def __init__(self, sock):
        self.sock = sock
        self.agent_done = False  # the agent closed its side: its EOF frame is sent
        self.host_done = False  # the host sent its EOF


class Forwarder:
    def __init__(self, listener, host_in, host_out):
        self.listener, self.host_in, self.host_out = listener, host_in, host_out
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.selector.register(host_in, selectors.EVENT_READ)
        self.connections = {}
        self.count = 0
        self.buffer = bytearray()

    def run(self):
        """Relay until the host closes its stream."""
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.listener:
                    self.accept()
                elif key.fileobj == self.host_in:
                    if not self.from_host():
                        return
                else:
                    self.from_agent(key.data)

    def accept(self):
        sock, _ = self.listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.count += 1
        self.connections[self.count] = connection = Connection(sock)
        self.selector.register(sock, selectors.EVENT_READ, (self.count, connection))
        send_frame(self.host_out, OPEN, self.count)

    def from_agent(self, numbered):
        number, connection = numbered
        try:
            data = connection.sock.recv(_CHUNK)
        except OSError:
            data = b""
        if data:
            send_frame(self.host_out, DATA, number, data)
            return
        self.selector.unregister(connection.sock)
        connection.agent_done = True
        send_frame(self.host_out, EOF, number)
        self.end_if_done(number, connection)

    def from_host(self):
        """Deliver the host's whole frames to their connections; False once the host's stream is closed."""
        data = os.read(self.host_in, _CHUNK)
        if not data:
            return False
        self.buffer += data
        while len(self.buffer) >= FRAME.size:
            kind, number, size = FRAME.unpack_from(self.buffer)
            if len(self.buffer) < FRAME.size + size:
                break
            payload = bytes(self.buffer[FRAME.size:FRAME.size + size])
            del self.buffer[:FRAME.size + size]
            connection = self.connections.get(number)
            if connection is not None:
                self.deliver(kind, number, connection, payload)
        return True

    def deliver(self, kind, number, connection, payload):
        try:
            if kind == DATA:
                connection.sock.sendall(payload)
            elif kind == EOF:
                connection.host_done = True
                connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.end_if_done(number, connection)

    def end_if_done(self, number, connection):
        if connection.agent_done and connection.host_done:
            del self.connections[number]
            connection.sock.close()


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    host_out = sys.stdout.fileno()
    send_frame(host_out, READY, 0, f"{listener.getsockname()[1]} {os.getpid()}".encode())
    Forwarder(listener, sys.stdin.fileno(), host_out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
