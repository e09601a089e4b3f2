"""Generation backends behind one small protocol: token ids in; token ids, logprobs and finish reason out.

This module holds what every backend shares (`Completion`, `Sampling`, the `Generator` protocol,
the logprob check); each backend has a module of its own:

- `TransformersGenerator` (generation/transformers.py): `model.generate` on any causal LM (CPU, tests, small models).
- `VLLMGenerator` (generation/vllm.py): an in-process `vllm.LLM` with `SamplingParams(logprobs=0)`.
- `VLLMServerGenerator` (generation/vllm_server.py): a vLLM server's OpenAI-compatible `/v1/completions`, with token-id prompts,
  `return_token_ids` and `logprobs=0` (for use without a trainer; needs only httpx).
- `VLLMClientGenerator` (generation/vllm_server.py): the same endpoint through `trl`'s own `VLLMClient`, the client a trainer
  in vLLM server mode already holds (and syncs weights through).

`generator_from_trainer` (generation/trainer.py) picks the one a `GRPOTrainer` is configured for.

Every backend checks that each sampled token has a finite logprob, and names the request that
lacks one: a NaN would otherwise pass silently into importance sampling.

A logprob is the sampling policy's logprob of the token it sampled: the distribution after
temperature and the other sampling processors, which is what vLLM reports with
`logprobs_mode="processed_logprobs"` (TRL's setting) and what `transformers` calls `scores`.

vLLM needs a GPU and is not installed on the machines this project is tested on: the two vLLM
backends follow vLLM's documented API (the `vllm` extra pins the range TRL 1.16 supports), and
the server backend is tested against a local HTTP server that speaks the same format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, StrictInt

from wrappers.trl.config import Options

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Completion:
    """One sampled continuation: its tokens, the logprob of each, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason  # "stop": ended with a stop token (included); "length": hit its token budget

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


class Sampling(Options):
    """Sampling parameters, with the meanings TRL's GRPOConfig gives them (0 / 1.0 / None = off).

    Checked by pydantic (strict, unknown fields rejected) when built; give them by name.
    """

    temperature: Annotated[float, Field(gt=0, allow_inf_nan=False, description="a temperature > 0 (sampling needs one)")] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1, description="a probability mass in (0, 1]")] = 1.0
    top_k: Annotated[StrictInt, Field(ge=0, description="an integer >= 0 (0: off)")] = 0
    min_p: Annotated[float | None, Field(ge=0, le=1, description="a probability in [0, 1], or None (off)")] = None
    repetition_penalty: Annotated[float, Field(gt=0, allow_inf_nan=False, description="a positive penalty (1.0: off)")] = 1.0


class Generator(Protocol):
    """What the rollout needs from a generation backend."""

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        """One completion per prompt; `max_tokens[i]` bounds the i-th completion's length."""
        ...


def _check_batch(prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> None:
    if len(prompts) != len(max_tokens):
        raise ValueError(f"{len(prompts)} prompts but {len(max_tokens)} token budgets")
    if any(budget < 1 for budget in max_tokens):
        raise ValueError(f"every token budget must be at least 1, got {min(max_tokens)}")
    if any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("empty prompt: a prompt needs at least one token")


class MissingLogprobError(ValueError):
    """A backend returned no finite logprob for a sampled token."""


def checked_logprobs(logprobs: Sequence[float | None] | None, num_tokens: int, request: str) -> list[float]:
    """`logprobs` as floats, or a `MissingLogprobError` naming `request` and the first bad position."""
    if logprobs is None:
        raise MissingLogprobError(f"{request}: the backend returned no logprobs (ask for logprobs=0)")
    if len(logprobs) != num_tokens:
        raise MissingLogprobError(f"{request}: {num_tokens} sampled tokens but {len(logprobs)} logprobs")
    for position, value in enumerate(logprobs):
        if value is None or not math.isfinite(value):
            raise MissingLogprobError(f"{request}: the logprob of sampled token {position} is {value!r}")
    return [float(value) for value in logprobs]  # type: ignore[arg-type]


def _cut(token_ids: list[int], logprobs: list[float], max_tokens: int, stop_ids: set[int]) -> Completion:
    """The completion up to and including its first stop token, within its budget."""
    for index, token in enumerate(token_ids[:max_tokens]):
        if token in stop_ids:
            return Completion(token_ids[: index + 1], logprobs[: index + 1], "stop")
    return Completion(token_ids[:max_tokens], logprobs[:max_tokens], "length")


def vllm_sampling(sampling: Sampling) -> dict[str, Any]:
    """`sampling` as vLLM's `SamplingParams` (and its server's request fields) name it."""
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": 0.0 if sampling.min_p is None else sampling.min_p,
        "repetition_penalty": sampling.repetition_penalty,
    }
