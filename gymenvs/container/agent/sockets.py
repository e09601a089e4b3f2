"""The channel's sockets (its unix socket, its listener on the agent's container's loopback, their connections),
served by the thread that waits for the channel's next event.

An env's thread waits for the agent's next request in `LLMChannel.next_event`, and while it waits it reads the
sockets itself (`ChannelSockets.wait`): the request reaches the thread that needs it with no hand-off between
threads, and only that thread wakes (the round trip 12 to 24% lower in most formats: docs/swe-agents.md, "The waiting
thread reads the request"). While no thread waits (the policy is thinking), the sockets' own daemon thread serves
them, so the agent's probes, refusals, new connections and its end are answered at once.

Two epoll sets make the switch cheap: `_sockets` holds the sockets, and the daemon thread's own set holds
`_sockets`, which a waiting thread takes out for as long as it waits (one `epoll_ctl` each way). Whichever thread
serves reads under one lock, from non-blocking sockets, so a stale wake-up of the other finds nothing to read and
no two threads feed one connection.
"""

from __future__ import annotations

import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

_CHUNK = 1 << 16
_POLL_S = 0.1  # how often the daemon thread looks for a stalled request, and for its stop
_WAKE = "wake"  # the owner of the wake-up socket, which another thread's event writes to


class SocketTransport:
    """A connection accepted on one of the channel's sockets, non-blocking. A reply that does not fit in the
    socket's buffer waits for the agent to read, at most `timeout` seconds (an agent that has stopped reading)."""

    def __init__(self, sock: socket.socket, timeout: float):
        sock.setblocking(False)
        self.sock = sock
        self.timeout = timeout
        self.reading = True  # a serving thread reads it (and closes it once the agent's end arrives)

    def send(self, data: bytes) -> None:
        unsent, deadline = memoryview(data), 0.0
        while True:
            try:
                unsent = unsent[self.sock.send(unsent):]
            except BlockingIOError:
                pass
            if not unsent:
                return
            deadline = deadline or time.monotonic() + self.timeout
            if not _writable(self.sock, deadline - time.monotonic()):
                raise TimeoutError(f"the agent read none of its reply for {self.timeout:g} s")

    def close(self) -> None:
        try:  # wakes the serving thread, which closes the socket
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if not self.reading:  # the agent's end came first: no thread will close it
            self.sock.close()


def _writable(sock: socket.socket, timeout: float) -> bool:
    if timeout <= 0:
        return False
    poll = select.poll()
    poll.register(sock, select.POLLOUT)
    return bool(poll.poll(timeout * 1000))


class ChannelSockets:
    """A unix socket at `path`, and `also` (a listening TCP socket) when given; each connection accepted on them is
    handed to `connect` (a `SocketTransport` in, the channel's connection or None to refuse it out). Served by
    `wait`'s caller while it waits, by a daemon thread otherwise; `close` stops it and closes every socket."""

    def __init__(self, path: str, connect: Callable[[SocketTransport], Any], *, read_timeout: float,
                 also: socket.socket | None = None):
        self._connect, self._read_timeout = connect, read_timeout
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(path)
        unix.listen(16)
        self._wake_reader, self._waker = socket.socketpair()
        self._waker.setblocking(False)  # a full buffer already wakes the waiter
        self._owners: dict[int, tuple[socket.socket, Any]] = {}  # by file descriptor: a listener's owner is None
        self._sockets = select.epoll()
        for listener in (unix, also) if also is not None else (unix,):
            self._add(listener, None)
        self._add(self._wake_reader, _WAKE)
        self._background = select.epoll()  # the daemon thread's: `_sockets` unless a waiter has taken it
        self._background.register(self._sockets.fileno(), select.EPOLLIN)
        self._serving = threading.Lock()  # one thread reads the sockets at a time
        self._lending = threading.Lock()  # `_waiter`, and `_sockets` in or out of `_background`
        self._waiter: int | None = None  # the thread serving in `wait`, if one is
        self._next_expiry = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._serve_in_background, name="gymenvs-llm-channel", daemon=True)
        self._thread.start()

    def wait(self, events: queue.SimpleQueue, deadline: float) -> Any:
        """The next of `events`, serving the sockets from this thread until one is posted; None once `deadline` (a
        `time.monotonic()`) has passed."""
        try:
            return events.get_nowait()
        except queue.Empty:
            pass
        if not self._take_sockets():  # closed, or another thread already waits
            try:
                return events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
        try:
            while True:
                try:
                    return events.get_nowait()
                except queue.Empty:
                    pass
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped:
                    return None
                try:  # another thread's event, or `close`, wakes it (`nudge`); the daemon thread expires stalled requests
                    ready = self._sockets.poll(remaining)
                except ValueError:  # closed meanwhile: `_stopped` says so
                    continue
                with self._serving:
                    self._handle(ready)
        finally:
            self._give_back_sockets()

    def nudge(self) -> None:
        """Wake the thread serving in `wait`: an event was posted by another thread (it sees its own)."""
        waiter = self._waiter
        if waiter is not None and waiter != threading.get_ident():
            try:
                self._waker.send(b"\0")
            except OSError:  # full (a wake-up is pending), or closed
                pass

    def close(self) -> None:
        """Stop serving and close every socket; safe to call twice."""
        self._stopped = True
        try:
            self._waker.send(b"\0")
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join()

    # -- lending the sockets to a waiting thread ----------------------------------------------------

    def _take_sockets(self) -> bool:
        with self._lending:
            if self._waiter is not None or self._stopped:
                return False
            self._waiter = threading.get_ident()
            self._background.unregister(self._sockets.fileno())
            return True

    def _give_back_sockets(self) -> None:
        with self._lending:
            self._waiter = None
            if not self._stopped:
                self._background.register(self._sockets.fileno(), select.EPOLLIN)

    def _serve_in_background(self) -> None:
        try:
            while not self._stopped:
                woken = self._background.poll(_POLL_S)
                with self._serving:
                    self._handle(self._sockets.poll(0) if woken and not self._stopped else [])
        finally:
            self._close_all()

    def _close_all(self) -> None:
        with self._lending, self._serving:
            for sock, _ in self._owners.values():
                sock.close()
            self._owners.clear()
            for resource in (self._sockets, self._background, self._waker):
                resource.close()

    # -- serving: under `_serving` ---------------------------------------------------------------------

    def _handle(self, ready: list[tuple[int, int]]) -> None:
        if self._stopped:
            return
        for descriptor, _ in ready:
            sock, owner = self._owners.get(descriptor, (None, None))
            if sock is None:  # removed since it was polled
                continue
            if owner is None:
                self._accept(sock)
            elif owner is _WAKE:
                _drain(sock)
            else:
                self._read(sock, owner)
        now = time.monotonic()
        if now >= self._next_expiry:
            self._next_expiry = now + _POLL_S
            for _, owner in list(self._owners.values()):
                if owner is not None and owner is not _WAKE:
                    owner.expire(now)

    def _add(self, sock: socket.socket, owner: Any) -> None:
        sock.setblocking(False)
        self._owners[sock.fileno()] = (sock, owner)
        self._sockets.register(sock.fileno(), select.EPOLLIN)

    def _remove(self, sock: socket.socket) -> None:
        self._sockets.unregister(sock.fileno())
        del self._owners[sock.fileno()]

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, _ = listener.accept()
        except OSError:  # taken by the other thread's stale wake-up, or aborted by the agent
            return
        if sock.family == socket.AF_INET:  # a request's last piece, or a reply, leaves at once
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = self._connect(SocketTransport(sock, self._read_timeout))
        if connection is None:
            sock.close()
        else:
            self._add(sock, connection)

    def _read(self, sock: socket.socket, connection: Any) -> None:
        try:
            data = sock.recv(_CHUNK)
        except BlockingIOError:  # read already, by the other thread's turn
            return
        except OSError:  # reset by the agent
            data = b""
        if not data:  # the agent's end (or ours): a reply still waiting may go out on a half-closed socket
            self._remove(sock)
            connection.transport.reading = False
            if connection.closed:
                sock.close()
        connection.receive(data)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:  # nothing more to read
        pass
