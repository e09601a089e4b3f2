"""Generators that sample from a vLLM server over HTTP: `VLLMServerGenerator` (this package's own client)
and `VLLMClientGenerator` (through the `trl` `VLLMClient` a trainer in vLLM server mode holds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrappers.trl.generation.base import Completion, FinishReason, Sampling, _check_batch, _cut, checked_logprobs, vllm_sampling


class VLLMServerGenerator:
    """Samples from a vLLM server through its OpenAI-compatible `/v1/completions` endpoint.

    A thin user of `wrappers.trl.serve.client.ServerClient`. The whole batch goes in one request,
    prompts as token-id lists, with `return_token_ids` and `logprobs=0` (start the server with
    `--logprobs-mode processed_logprobs`). One `max_tokens` serves the batch (the largest budget); a
    completion that outruns its own budget is cut here.

    Args:
        base_url: the server's root, such as `http://localhost:8000`.
        model: the served model name (default: the first one `/v1/models` lists).
        sampling: temperature, top-p, top-k, min-p, repetition penalty.
        stop_token_ids: tokens that end a turn, used to cut a completion at its own budget.
        timeout_s: seconds to wait for a response.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        sampling: Sampling | None = None,
        stop_token_ids: Sequence[int] = (),
        timeout_s: float = 600.0,
        extra_request_fields: dict | None = None,
    ):
        from wrappers.trl.serve.client import ServerClient

        self.base_url = base_url.rstrip("/")
        self.sampling = sampling or Sampling()
        self.stop_token_ids = set(stop_token_ids)
        self.extra_request_fields = dict(extra_request_fields or {})
        self._client = ServerClient(self.base_url, timeout_s=timeout_s)
        try:
            self.model = model or self._client.first_model()
        except BaseException:
            self.close()
            raise

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        _check_batch(prompts, max_tokens)
        request = {
            "model": self.model,
            "prompt": [list(prompt) for prompt in prompts],
            "max_tokens": max(max_tokens),
            "n": 1,
            "logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            **vllm_sampling(self.sampling),
            **self.extra_request_fields,
        }
        choices = sorted(self._client.completions(request)["choices"], key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise RuntimeError(f"vLLM server returned {len(choices)} choices for {len(prompts)} prompts")
        return [self._completion(choice, budget) for choice, budget in zip(choices, max_tokens)]

    def _completion(self, choice: dict[str, Any], max_tokens: int) -> Completion:
        token_ids = choice.get("token_ids")
        request = f"prompt {choice['index']} of the batch sent to {self.base_url}/v1/completions"
        if token_ids is None:
            raise RuntimeError(f"{request}: no token_ids (vLLM >= 0.10.2 is needed for return_token_ids)")
        logprobs = checked_logprobs((choice.get("logprobs") or {}).get("token_logprobs"), len(token_ids), request)
        finished: FinishReason = "stop" if choice.get("finish_reason") == "stop" else "length"
        if len(token_ids) <= max_tokens:
            return Completion(list(token_ids), logprobs, finished)
        return _cut(list(token_ids), logprobs, max_tokens, self.stop_token_ids)

    def close(self) -> None:
        """Close the HTTP client (also done when the generator is collected)."""
        self._client.close()

    def __enter__(self) -> VLLMServerGenerator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class VLLMClientGenerator:
    """Samples through `trl`'s `VLLMClient`: the client a `GRPOTrainer` in vLLM server mode holds.

    The client sends token-id prompts to `/v1/completions` with `logprobs=0` and returns, per
    sampled token, its logprob first. It reports no finish reason: a completion that ends with a
    stop token within its budget stopped, any other ran out of tokens.

    Args:
        client: a `trl.generation.vllm_client.VLLMClient`.
        sampling: temperature, top-p, top-k, min-p, repetition penalty.
        stop_token_ids: tokens that end a turn.
        generation_kwargs: extra request fields (`GRPOConfig.generation_kwargs`).
    """

    def __init__(
        self,
        client: Any,
        *,
        sampling: Sampling | None = None,
        stop_token_ids: Sequence[int] = (),
        generation_kwargs: dict | None = None,
    ):
        self.client = client
        self.sampling = sampling or Sampling()
        self.stop_token_ids = set(stop_token_ids)
        self.generation_kwargs = dict(generation_kwargs or {})

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        _check_batch(prompts, max_tokens)
        output = self.client.generate(
            prompts=[list(prompt) for prompt in prompts],
            n=1,
            max_tokens=max(max_tokens),
            logprobs=0,
            generation_kwargs=self.generation_kwargs or None,
            **vllm_sampling(self.sampling),
        )
        all_logprobs = output.get("logprobs") or [None] * len(prompts)
        completions = []
        for index, (token_ids, positions, budget) in enumerate(zip(output["completion_ids"], all_logprobs, max_tokens)):
            token_ids = list(token_ids)
            sampled = None if positions is None else [position[0] if position else None for position in positions]
            logprobs = checked_logprobs(sampled, len(token_ids), f"prompt {index} of the batch sent by VLLMClient")
            completions.append(_cut(token_ids, logprobs, budget, self.stop_token_ids))
        return completions
