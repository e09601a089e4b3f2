"""Text spaces wide enough for what an LLM reads and writes."""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

#: Characters `sample()` draws from. Membership is wider: see `UnicodeText.contains`.
SAMPLE_CHARSET = string.printable


class UnicodeText(Text):
    """A `Text` space holding any Unicode string of bounded length.

    Gymnasium's `Text` accepts only characters from a fixed charset (62 alphanumerics by
    default, so a space already falls outside it) and at least one character. LLM text is
    arbitrary Unicode and may be empty, so membership here means: a `str`, between
    `min_length` and `max_length` characters, encodable as UTF-8 (no lone surrogates).
    `sample()` draws printable ASCII, which is enough for `check_env` and fuzzing.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length and is_utf8_encodable(x)

    @property
    def is_np_flattenable(self) -> bool:
        # Flattening maps each character to its charset index: impossible for arbitrary Unicode.
        return False

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object, /) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


def is_utf8_encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fitted_text(text: str, max_length: int) -> str:
    """`text` made valid (`to_valid_text`) and cut to `max_length` characters (`clip_text`): what an env
    hands out as an observation. Short ASCII text, most observations, is returned at once."""
    if text.isascii() and len(text) <= max_length:
        return text
    return clip_text(to_valid_text(text), max_length)


def to_valid_text(text: str) -> str:
    """`text` with lone surrogates replaced, so it is valid Unicode and fits `UnicodeText`."""
    if is_utf8_encodable(text):
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def clip_text(text: str, max_length: int) -> str:
    """`text` cut to `max_length` characters, keeping its head and tail around a marker."""
    if len(text) <= max_length:
        return text
    marker = "\n[... {} characters cut ...]\n"
    room = max_length - len(marker.format(len(text)))
    head = room // 2
    tail = room - head
    return text[:head] + marker.format(len(text) - room) + text[len(text) - tail :]
