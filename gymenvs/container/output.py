"""Command output as an agent reads it: capped to a budget (head and tail kept) and decoded safely."""

from __future__ import annotations

import re

# CSI sequences (colours, cursor moves) and two-character escapes: noise to a language model.
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")
# Control characters other than tab and newline (NUL, bell, backspace, DEL...).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class OutputCapture:
    """Bytes of a stream kept within `limit`: the first half and the last half, and how much fell between.

    Memory stays bounded whatever the stream's size, so `yes` or a binary dump cannot exhaust the host.
    """

    def __init__(self, limit: int):
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self.tail_limit + 65536:  # trim in batches, not on every chunk
                del self._tail[: -self.tail_limit]

    @property
    def tail(self) -> bytes:
        return bytes(self._tail[-self.tail_limit :]) if self.tail_limit else b""

    @property
    def elided(self) -> int:
        """How many bytes were dropped between the head and the tail."""
        return self.total - len(self.head) - len(self.tail)

    def raw(self) -> bytes:
        """The kept bytes, head then tail (for parsing: no marker between them)."""
        return bytes(self.head) + self.tail

    def text(self) -> str:
        """The kept output as clean text, with a note where bytes were dropped."""
        if not self.elided:
            return decode_output(self.raw())
        note = f"\n[... {self.elided} bytes of output elided ...]\n"
        return decode_output(bytes(self.head)) + note + decode_output(self.tail)


def decode_output(data: bytes) -> str:
    """Bytes from a process as printable text: invalid UTF-8 and control characters become U+FFFD,
    ANSI escape sequences are dropped, and carriage returns become newlines."""
    text = data.decode("utf-8", errors="replace")
    text = _ANSI_ESCAPE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", text)
