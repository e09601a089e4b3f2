"""Black-box mode: an OpenAI-compatible Chat Completions endpoint (the upstream) answers the agent's calls.

Each request goes up in the internal form (which is Chat Completions); the answer comes back as it came
for a Chat Completions agent, or translated into the agent's own format (Responses, Anthropic Messages).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymenvs.container.agent.connection import Call
from gymenvs.container.agent.wire import Reply, reply_from_message
from gymenvs.container.agent.wire import chat as chat_wire

#: Answers a call with a reply in the call's own format: (the payload, the reply as an assistant message).
Respond = Callable[[Call, Reply], tuple[dict[str, Any], dict[str, Any]]]


class Upstream:
    """An OpenAI SDK client of the upstream at `url`; `model` (if given) replaces the model the agent asks for."""

    def __init__(self, url: str, *, api_key: str | None, model: str | None, timeout: float):
        import openai

        # The SDK insists on a key; an upstream that checks none ignores this one.
        self._client = openai.OpenAI(base_url=url, api_key=api_key or "unused", timeout=timeout, max_retries=2)
        self._model = model

    def answer(self, call: Call, respond: Respond) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
        """The upstream's answer to `call` in the agent's format (a chat completion passed on as it came), and its
        assistant message (None when the upstream failed)."""
        status, completion = self._post(call.body)
        message = chat_wire.reply_of(completion) if status == 200 else None
        if call.wire is chat_wire:
            return status, completion, message
        if status != 200 or message is None:
            error = completion.get("error", completion) if status != 200 else "the upstream sent no assistant message"
            return status if status != 200 else 502, call.wire.error(f"the upstream failed: {error}", "api_error"), None
        reply = reply_from_message(message)
        usage = completion.get("usage") or {}
        reply.prompt_tokens, reply.completion_tokens = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        finish = (completion.get("choices") or [{}])[0].get("finish_reason")
        reply.finish_reason = finish if finish in ("stop", "tool_calls", "length") else None
        payload, message = respond(call, reply)
        return 200, payload, message

    def close(self) -> None:
        self._client.close()

    def _post(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The upstream's answer to the agent's request, passed through as it came (status, JSON body)."""
        import openai

        body = {**request, "stream": False, **({"model": self._model} if self._model else {})}
        body.pop("stream_options", None)
        try:
            payload = self._client.post("/chat/completions", body=body, cast_to=object)
        except openai.APIStatusError as exc:
            return exc.status_code, _error_body(exc)
        except openai.APIError as exc:  # no connection, a timeout, or a body that is no JSON
            return 502, {"error": {"message": f"the upstream failed: {exc}", "type": "upstream_error"}}
        return 200, payload if isinstance(payload, dict) else {"error": {"message": str(payload)}}


def _error_body(error: Any) -> dict[str, Any]:
    """The upstream's error response as it sent it, or an OpenAI-shaped error if it sent no JSON object."""
    try:
        body = error.response.json()
    except ValueError:
        body = None
    return body if isinstance(body, dict) else {"error": {"message": str(error), "type": "upstream_error"}}
