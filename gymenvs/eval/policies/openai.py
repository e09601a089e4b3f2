"""An OpenAI-compatible chat-completions endpoint as a policy, through the `openai` SDK."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gymenvs.eval.policies.base import Action, Messages

if TYPE_CHECKING:
    from openai import OpenAI


class OpenAIPolicy:
    """Asks an OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, TGI, llama.cpp, a hosted API)
    for the next turn, with the env's tools; a returned tool call becomes the action.

    Args:
        base_url: the server's root, e.g. `http://localhost:8000` (`/v1` is added).
        model: the model name the server serves.
        api_key: sent as a bearer token (default: the SDK's `OPENAI_API_KEY`, else `EMPTY`, which
            servers without keys ignore).
        temperature, max_tokens: sampling settings of each request.
        timeout_s: seconds to wait for each response.
        max_retries: the SDK's retries of a failed connection, timeout, 429 or 5xx answer, with backoff.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ):
        import openai

        self.model = model
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}
        self._client: OpenAI = openai.OpenAI(
            base_url=base_url.rstrip("/") + "/v1",
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout_s,
            max_retries=max_retries,
        )

    def new_episode(self) -> OpenAIPolicy:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        extra = {"tools": list(tools)} if tools else {}
        response = self._client.chat.completions.create(
            model=self.model, messages=_openai_messages(messages), **self.sampling, **extra  # type: ignore[call-overload]
        )
        message = response.choices[0].message
        if message.tool_calls:
            function = message.tool_calls[0].function
            arguments = function.arguments or "{}"
            return {"name": function.name, "arguments": json.loads(arguments) if isinstance(arguments, str) else arguments}
        return message.content or ""

    def close(self) -> None:
        self._client.close()


def _openai_messages(messages: Messages) -> Messages:
    """Tool results become user messages: without the call ids a real API needs, a plain turn is safer."""
    return [{"role": "user" if m["role"] == "tool" else m["role"], "content": m["content"]} for m in messages]
