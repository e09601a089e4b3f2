"""Server-sent events, written as one body: each CLI measured accepted a whole SSE reply with a Content-Length."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def data_events(chunks: Iterable[dict[str, Any]], done: bool = True) -> bytes:
    """`data: <json>` events (Chat Completions), ending with `data: [DONE]`."""
    body = b"".join(b"data: " + _json(chunk) + b"\n\n" for chunk in chunks)
    return body + b"data: [DONE]\n\n" if done else body


def typed_events(events: Iterable[dict[str, Any]]) -> bytes:
    """`event: <type>` + `data: <json>` events (Responses, Anthropic Messages); each event's type is its "type"."""
    return b"".join(b"event: " + event["type"].encode() + b"\ndata: " + _json(event) + b"\n\n" for event in events)


_ENCODER = json.JSONEncoder(separators=(",", ":"))  # built once: json.dumps with options builds one per call


def _json(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()
