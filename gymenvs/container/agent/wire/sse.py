"""Server-sent events, written as one body: each CLI measured accepted a whole SSE reply with a Content-Length.
Their JSON is orjson's (compact, UTF-8 as it is): a streamed reply encodes its response up to three times."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


def data_events(chunks: Iterable[dict[str, Any]], done: bool = True) -> bytes:
    """`data: <json>` events (Chat Completions), ending with `data: [DONE]`."""
    body = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks)
    return body + b"data: [DONE]\n\n" if done else body


def typed_events(events: Iterable[dict[str, Any]]) -> bytes:
    """`event: <type>` + `data: <json>` events (Responses, Anthropic Messages); each event's type is its "type"."""
    return b"".join(b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n" for event in events)

