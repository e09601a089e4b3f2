"""The three LLM wire formats an agent may speak on its channel, and the side calls among its requests.

Each format's module (`chat`, `responses`, `anthropic`) turns that format's request into the one
internal form the policy sees (`common`: an OpenAI-style message list, function-schema tools and the
sampling parameters) and the policy's `Reply` back into that format, whole or as server-sent events
(`sse`). `route` says which format and endpoint a request path is; `side_call_kind` whether a request
is one of the agent's main turns or a side call (a title, a summary, a token count, a quota probe).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gymenvs.container.agent.wire import anthropic, chat, responses
from gymenvs.container.agent.wire.common import Reply, ReplyCall, WireError, reply_from_action, reply_from_message

__all__ = ["Reply", "ReplyCall", "Route", "Wire", "WireError", "reply_from_action", "reply_from_message", "respond", "route",
           "side_call_kind", "SIDE_MODEL"]

#: The model name agents are told to use for their small/background model (titles, summaries):
#: requests naming it are side calls (`GYMENVS_SIDE_MODEL` in the agent's environment).
SIDE_MODEL = "gymenvs-side"

_CODEX_TURN_METADATA = "x-codex-turn-metadata"
_TITLE_PROMPT = "title generator"


class Wire(Protocol):
    NAME: str

    def request(self, body: Any, conversations: Mapping[str, list] | None = None) -> dict[str, Any]: ...

    def response(self, reply: Reply, request: Mapping[str, Any], model: str, raw: Mapping[str, Any]) -> dict[str, Any]: ...

    def remember(self, conversations: MutableMapping[str, list], payload: Mapping[str, Any], request: Mapping[str, Any],
                 raw: Mapping[str, Any], reply_message: dict[str, Any]) -> None: ...

    def stream(self, payload: Mapping[str, Any], request: Mapping[str, Any]) -> bytes: ...

    def error(self, message: str, kind: str = ...) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Route:
    wire: Wire
    endpoint: Literal["turn", "count_tokens"] = "turn"


_ROUTES: dict[str, Route] = {
    "/v1/chat/completions": Route(chat), "/chat/completions": Route(chat),
    "/v1/responses": Route(responses), "/responses": Route(responses),
    "/v1/messages": Route(anthropic), "/messages": Route(anthropic),
    "/v1/messages/count_tokens": Route(anthropic, "count_tokens"), "/messages/count_tokens": Route(anthropic, "count_tokens"),
}
PATHS = tuple(_ROUTES)


def respond(wire: Wire, request: Mapping[str, Any], raw: Mapping[str, Any], reply: Reply, model: str,
            conversations: MutableMapping[str, list]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`reply` to `request` in `wire`'s format (what the agent receives), and as an assistant message of the
    internal form (what the history holds); a Responses reply is kept in `conversations`."""
    payload = wire.response(reply, request, model, raw)
    message = reply.message()
    wire.remember(conversations, payload, request, raw, message)
    return payload, message


def route(path: str) -> Route | None:
    """The format and endpoint of a POST to `path` (its query, such as Claude Code's `?beta=true`, ignored)."""
    return _ROUTES.get(path.split("?", 1)[0].rstrip("/"))


def side_call_kind(endpoint: str, headers: Mapping[str, str] | Any, request: Mapping[str, Any],
                   side_model: str = SIDE_MODEL) -> str | None:
    """Why a request is a side call ("count_tokens", "compaction", "small_model", "quota", "title"...), or None
    for one of the agent's main turns.

    - token counting: Anthropic's `/v1/messages/count_tokens`;
    - Codex marks each request in `x-codex-turn-metadata`: `request_kind` other than "turn" (its
      compaction, a prewarm) is a side call;
    - the agent's small/background model (titles, summaries) when its launch config names `side_model`;
    - Claude Code's quota probe: `max_tokens` 1 and the one user message "quota";
    - a title generator's call (OpenCode's, unless its config turns it off): no tools, and a system
      prompt that says it is one.
    """
    if endpoint != "turn":
        return endpoint
    metadata = headers.get(_CODEX_TURN_METADATA)
    if metadata:
        try:
            kind = json.loads(metadata).get("request_kind")
        except (ValueError, AttributeError):
            kind = None
        if isinstance(kind, str) and kind != "turn":
            return kind
    if request.get("model") == side_model:
        return "small_model"
    messages = request.get("messages") or []
    if request.get("max_tokens") == 1 and len(messages) == 1 and messages[0].get("content") == "quota":
        return "quota"
    if not request.get("tools") and messages and messages[0].get("role") == "system" \
            and _TITLE_PROMPT in str(messages[0].get("content", ""))[:200].lower():
        return "title"
    return None
