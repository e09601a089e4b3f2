"""Faults injected into a real Docker engine, to test a training stack against its infrastructure.

- `EngineProxy`: a unix socket in front of the engine's API socket that passes every request through
  and answers the ones a rule names with an HTTP error of the engine's own shape, as an engine under
  load or in trouble does (`docker.errors.APIError` in the client). Point a client at `proxy.url`
  (`DOCKER_HOST`) and arm it with `fail(method, path_pattern, ...)`.
- `GradingKiller`: a thread that kills the grading container of one episode (or of any of this
  process's) as soon as the engine runs it, or once a named process runs in it.

The fault-injection tests (tests/container/test_faults.py) and the chaos run
(examples/benchmarks/swe_chaos.py) use both. Nothing here changes how an episode runs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gymenvs.container.runtime.owners import LABEL_EPISODE, LABEL_PID, LABEL_ROLE

if TYPE_CHECKING:
    from gymenvs.container.runtime.docker import DockerRuntime

DEFAULT_ENGINE_SOCKET = "/var/run/docker.sock"
_HEADER_END = b"\r\n\r\n"


@dataclass
class _Rule:
    method: str
    path: re.Pattern[str]
    status: int
    message: str
    times: int
    #: The request lines this rule answered.
    hits: list[str] = field(default_factory=list)


class EngineProxy:
    """A proxy of the engine's API socket that answers chosen requests with errors.

    `with EngineProxy() as proxy:` listens on a fresh unix socket (`proxy.url`, set then) and forwards each
    connection to `upstream`. Requests are read one at a time (HTTP/1.1 keep-alive, no pipelining,
    which is how the docker SDK talks); one that an armed rule matches is not forwarded, and the
    client gets the rule's status with `{"message": ...}`. A connection upgraded to a raw stream
    (`docker exec`, `attach`) is piped as it is.
    """

    def __init__(self, upstream: str | None = None):
        host = os.environ.get("DOCKER_HOST", "")
        self.upstream = upstream or (host.removeprefix("unix://") if host.startswith("unix://") else DEFAULT_ENGINE_SOCKET)
        self._directory = ""
        self.path = self.url = ""  # set when the proxy starts listening
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None

    def fail(self, method: str, path_pattern: str, *, status: int = 500, times: int = 1,
             message: str = "injected engine error") -> _Rule:
        """Answer the next `times` requests `method` on a path matching `path_pattern` (a regex searched
        in the path, API version included) with `status`; the rule, whose `hits` lists what it answered."""
        rule = _Rule(method.upper(), re.compile(path_pattern), status, message, times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def __enter__(self) -> EngineProxy:
        self._directory = tempfile.mkdtemp(prefix="gymenvs-engine-proxy-")
        self.path = os.path.join(self._directory, "docker.sock")
        self.url = f"unix://{self.path}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(64)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True, name="engine-proxy").start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._directory:
            for remove, name in ((os.unlink, self.path), (os.rmdir, self._directory)):
                try:
                    remove(name)
                except OSError:
                    pass
            self._directory = ""

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            engine.connect(self.upstream)
        except OSError:
            client.close()
            return
        threading.Thread(target=_pipe, args=(engine, client), daemon=True).start()
        buffer = b""
        try:
            while True:
                request, buffer, upgrade = _read_request(client, buffer)
                if request is None:
                    break
                answer = self._answer(request)
                if answer is not None:
                    client.sendall(answer)
                    continue
                engine.sendall(request)
                if upgrade:  # a raw stream from now on, in both directions
                    if buffer:
                        engine.sendall(buffer)
                    _pipe(client, engine)
                    break
        except OSError:
            pass
        finally:
            for end in (client, engine):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()

    def _answer(self, request: bytes) -> bytes | None:
        """The error response an armed rule gives `request`, or None to forward it."""
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        path = rest.rsplit(" ", 1)[0]
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and rule.method == method and rule.path.search(path):
                    rule.times -= 1
                    rule.hits.append(line)
                    body = json.dumps({"message": rule.message}).encode()
                    return (f"HTTP/1.1 {rule.status} Injected\r\nContent-Type: application/json\r\n"
                            f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        return None


def _read_request(sock: socket.socket, buffer: bytes) -> tuple[bytes | None, bytes, bool]:
    """One whole request from `sock` (with what was already read): (request, what follows it, whether it
    asks to upgrade to a raw stream); None at the end of the connection."""
    while _HEADER_END not in buffer:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None, b"", False
        buffer += chunk
    head, buffer = buffer.split(_HEADER_END, 1)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    upgrade = b"upgrade" in headers.get(b"connection", b"").lower()
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        body, buffer = _read_chunked(sock, buffer)
    else:
        length = int(headers.get(b"content-length", b"0") or 0)
        while len(buffer) < length:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return None, b"", False
            buffer += chunk
        body, buffer = buffer[:length], buffer[length:]
    return head + _HEADER_END + body, buffer, upgrade


def _read_chunked(sock: socket.socket, buffer: bytes) -> tuple[bytes, bytes]:
    """A chunked body, as sent (sizes included), and what follows it."""
    body = b""
    while True:
        while b"\r\n" not in buffer:
            buffer += _recv_some(sock)
        size_line, rest = buffer.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        while len(rest) < size + 2:
            rest += _recv_some(sock)
        body += size_line + b"\r\n" + rest[: size + 2]
        buffer = rest[size + 2 :]
        if size == 0:
            return body, buffer


def _recv_some(sock: socket.socket) -> bytes:
    chunk = sock.recv(1 << 16)
    if not chunk:
        raise OSError("the connection closed inside a chunked body")
    return chunk


def _pipe(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until either end closes (then half-close `target`)."""
    try:
        while chunk := source.recv(1 << 16):
            target.sendall(chunk)
    except OSError:
        pass
    try:
        target.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class GradingKiller(threading.Thread):
    """Kills one grading container of this process once the engine runs it: the grading of the episode
    `episode_id` (None: the first one seen) and, with `while_running`, once a process of that name runs
    in it. `killed` lists the ids of the containers killed (one at most). Use it as a context manager."""

    def __init__(self, runtime: DockerRuntime, while_running: str | None = None, *, episode_id: str | None = None,
                 poll_s: float = 0.05):
        super().__init__(daemon=True)
        self.client, self.while_running, self.episode_id, self.poll_s = runtime.client, while_running, episode_id, poll_s
        self.stop = threading.Event()
        self.killed: list[str] = []

    def _ready(self, container: Any) -> bool:
        import docker

        try:
            return self.while_running is None or self.while_running in str(container.top()["Processes"])
        except docker.errors.APIError:
            return False

    def run(self) -> None:
        import docker

        labels = [f"{LABEL_ROLE}=grading", f"{LABEL_PID}={os.getpid()}"]
        if self.episode_id is not None:
            labels.append(f"{LABEL_EPISODE}={self.episode_id}")
        mine = {"label": labels, "status": "running"}
        while not self.stop.is_set() and not self.killed:
            for container in self.client.containers.list(filters=mine, ignore_removed=True):
                if not self._ready(container):
                    continue
                try:
                    container.kill()
                except docker.errors.APIError:  # removed meanwhile: try the next one
                    continue
                self.killed.append(container.id)
                break
            self.stop.wait(self.poll_s)

    def __enter__(self) -> GradingKiller:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.join()
