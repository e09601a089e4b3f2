"""Policies `gymenvs eval` can run: scripted players, an OpenAI-compatible endpoint, a local transformers model.

A policy sees what a model would see, the conversation so far and the env's tool schemas, and
returns an action: free text, or a tool call as `{"name": ..., "arguments": {...}}`. It never
reads the env's hidden state. `make_policy(kind, env_id, ...)` builds one by name.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

Action = str | dict[str, Any]
Messages = list[dict[str, Any]]


class Policy(Protocol):
    """Chooses the next action from the conversation so far. `new_episode` is called before each episode."""

    name: str

    def new_episode(self) -> Policy:
        """A policy for one episode (the same object when it keeps no per-episode state)."""
        ...

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action: ...


# -- scripted players --------------------------------------------------------------------


class WordlePlayer:
    """Guesses a word consistent with all feedback so far, from the shipped answer list."""

    name = "scripted"

    def __init__(self) -> None:
        self.candidates: tuple[str, ...] = _answers()
        self.last_guess: str | None = None

    def new_episode(self) -> WordlePlayer:
        return WordlePlayer()

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        from gymenvs.envs.wordle import _MARKS

        feedback = re.search(r"^([GY-](?: [GY-]){4})$", messages[-1]["content"], re.MULTILINE)
        if self.last_guess is not None and feedback:
            marks_of = {symbol: mark for mark, symbol in _MARKS.items()}
            marks = tuple(marks_of[symbol] for symbol in feedback.group(1).split())
            self.candidates = _partition(self.candidates, self.last_guess).get(marks, ())
        self.last_guess = self.candidates[0] if self.candidates else "crane"
        return {"name": "guess", "arguments": {"word": self.last_guess}}


@functools.cache
def _answers() -> tuple[str, ...]:
    from gymenvs.envs.wordle import load_word_list

    return tuple(word.lower() for word in load_word_list("wordle_answers") if len(word) == 5)


@functools.lru_cache(maxsize=1024)  # every episode starts from the same list and first guess: split it once
def _partition(candidates: tuple[str, ...], guess: str) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The candidates grouped by the feedback `guess` would get if each were the secret."""
    from gymenvs.envs.wordle import score_guess

    groups: dict[tuple[str, ...], list[str]] = {}
    for word in candidates:
        groups.setdefault(tuple(score_guess(guess, word)), []).append(word)
    return {marks: tuple(words) for marks, words in groups.items()}


class CatchPlayer:
    """Moves the paddle towards the ball's column, read from the board's last line."""

    name = "scripted"

    def new_episode(self) -> CatchPlayer:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        where = re.findall(r"ball: row \d+, column (\d+); paddle: column (\d+)", messages[-1]["content"])
        if not where:
            return {"name": "move", "arguments": {"direction": "stay"}}
        ball, paddle = map(int, where[-1])
        direction = "right" if ball > paddle else "left" if ball < paddle else "stay"
        return {"name": "move", "arguments": {"direction": direction}}


class EchoPlayer:
    """Sends the same message every turn."""

    name = "scripted"

    def new_episode(self) -> EchoPlayer:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        return {"name": "echo", "arguments": {"message": "hello"}}


SCRIPTED: dict[str, Callable[[], Policy]] = {
    "gymenvs/Wordle-v0": WordlePlayer,
    "gymenvs/Catch-v0": CatchPlayer,
    "gymenvs/Echo-v0": EchoPlayer,
}


# -- an OpenAI-compatible endpoint ---------------------------------------------------------


class OpenAIPolicy:
    """Asks an OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, TGI, llama.cpp, a hosted API)
    for the next turn, with the env's tools; a returned tool call becomes the action.

    Args:
        base_url: the server's root, e.g. `http://localhost:8000` (`/v1` is added).
        model: the model name the server serves.
        api_key: sent as a bearer token when given.
        temperature, max_tokens: sampling settings of each request.
        timeout_s: seconds to wait for each response.
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
    ):
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    def new_episode(self) -> OpenAIPolicy:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        body = {"model": self.model, "messages": _openai_messages(messages), **self.sampling}
        if tools:
            body["tools"] = list(tools)
        response = self._client.post("/v1/chat/completions", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"{self._client.base_url}/v1/chat/completions answered {response.status_code}: {response.text[:300]}")
        message = response.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if calls:
            function = calls[0]["function"]
            arguments = function.get("arguments") or "{}"
            return {"name": function["name"], "arguments": json.loads(arguments) if isinstance(arguments, str) else arguments}
        return message.get("content") or ""

    def close(self) -> None:
        self._client.close()


def _openai_messages(messages: Messages) -> Messages:
    """Tool results become user messages: without the call ids a real API needs, a plain turn is safer."""
    return [{"role": "user" if m["role"] == "tool" else m["role"], "content": m["content"]} for m in messages]


# -- a local transformers model --------------------------------------------------------------


class TransformersPolicy:
    """Generates each turn with a local causal LM (a path or a loaded model) and its chat template; the
    env reads the reply as text (a `<tool_call>` block or free text).

    Args:
        model: a model path / name for `AutoModelForCausalLM.from_pretrained`, or a loaded model.
        tokenizer: the tokenizer (default: loaded from `model` when it is a path).
        max_new_tokens: the longest turn.
        temperature: 0 decodes greedily.
    """

    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any = None, *, max_new_tokens: int = 256, temperature: float = 0.0):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            model = AutoModelForCausalLM.from_pretrained(model)
        if tokenizer is None:
            raise ValueError("tokenizer=None: a loaded model needs its tokenizer")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.generation = {"max_new_tokens": max_new_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            self.generation["temperature"] = temperature

    def new_episode(self) -> TransformersPolicy:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        import torch

        inputs = self.tokenizer.apply_chat_template(
            messages, tools=list(tools) or None, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = self.model.generate(**inputs, **self.generation, pad_token_id=self.tokenizer.pad_token_id)
        return self.tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def make_policy(kind: str, env_id: str, **options: Any) -> Policy:
    """A policy by name: `scripted` (for the envs in `SCRIPTED`), `openai` (`base_url`, `model`, ...)
    or `transformers` (`model`, ...)."""
    if kind == "scripted":
        if env_id not in SCRIPTED:
            raise ValueError(f"no scripted policy for {env_id!r}; there are scripted policies for {sorted(SCRIPTED)}")
        return SCRIPTED[env_id]()
    if kind == "openai":
        return OpenAIPolicy(**options)
    if kind == "transformers":
        return TransformersPolicy(**options)
    raise ValueError(f"policy {kind!r}: expected one of scripted, openai, transformers")


def as_text(action: Action) -> str:
    """An action as the assistant message that carries it."""
    return action if isinstance(action, str) else json.dumps(action)
