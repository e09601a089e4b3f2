"""The agent's process in its container: a watcher thread keeps the tail of its output and reports its exit."""

from __future__ import annotations

import collections
import threading
import time

from gymenvs.container.agent.channel import AgentExited, LLMChannel
from gymenvs.container.runtime import ExecProcess

_LOG_TAIL_BYTES = 16 << 10


class AgentProcess:
    """The agent started as `stream`; its exit is posted on `channel` as an `AgentExited` event."""

    def __init__(self, stream: ExecProcess, channel: LLMChannel):
        self._stream = stream
        self._channel = channel
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gymenvs-agent-watcher", daemon=True)
        self._thread.start()

    def log_tail(self) -> str:
        return b"".join(self._tail).decode("utf-8", "replace")

    def stop(self) -> None:
        self._stopped.set()

    def join(self) -> None:
        self._thread.join(timeout=10)
        self._stream.close()

    def _watch(self) -> None:
        while not self._stopped.is_set():
            data = self._stream.read(time.monotonic() + 0.2)
            if data == b"":
                break
            if data:
                self._keep(data)
        if self._stopped.is_set():
            return
        exit_code = None
        for _ in range(50):  # the engine may report the exec as running for a moment after its output closed
            exit_code = self._stream.exit_code()
            if exit_code is not None or self._stopped.wait(0.05):
                break
        self._channel.post(AgentExited(exit_code, self.log_tail()))

    def _keep(self, data: bytes) -> None:
        self._tail.append(data)
        self._tail_bytes += len(data)
        while self._tail_bytes - len(self._tail[0]) >= _LOG_TAIL_BYTES:
            self._tail_bytes -= len(self._tail.popleft())
