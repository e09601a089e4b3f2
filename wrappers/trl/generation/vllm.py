"""`VLLMGenerator`: an in-process `vllm.LLM` (TRL's colocate mode). vLLM needs a GPU; see docs/trl.md, "What ran here"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wrappers.trl.generation.base import Completion, Sampling, _check_batch, checked_logprobs, vllm_sampling


class VLLMGenerator:
    """Samples with an in-process `vllm.LLM` (TRL's colocate mode), one `SamplingParams` per prompt.

    For logprobs that match the training model, the engine must run with
    `logprobs_mode="processed_logprobs"`, as TRL's colocate engine does.
    """

    def __init__(self, llm: Any, *, sampling: Sampling | None = None, extra_sampling_params: dict | None = None):
        self.llm = llm
        self.sampling = sampling or Sampling()
        self.extra_sampling_params = dict(extra_sampling_params or {})

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        from vllm import SamplingParams

        _check_batch(prompts, max_tokens)
        params = [SamplingParams(**self._params(budget)) for budget in max_tokens]
        requests = [{"prompt_token_ids": list(prompt)} for prompt in prompts]
        outputs = self.llm.generate(requests, sampling_params=params, use_tqdm=False)
        return [_from_vllm_output(output.outputs[0], f"prompt {index} of the batch") for index, output in enumerate(outputs)]

    def _params(self, max_tokens: int) -> dict[str, Any]:
        return {
            **vllm_sampling(self.sampling),
            "n": 1,
            "max_tokens": max_tokens,
            "logprobs": 0,
            **self.extra_sampling_params,
        }


def _from_vllm_output(output: Any, request: str = "request") -> Completion:
    """A `vllm.CompletionOutput` with `logprobs=0`: each position maps the sampled token to its `Logprob`."""
    token_ids = list(output.token_ids)
    positions = output.logprobs
    reported: list[float | None] | None = None
    if positions is not None:
        reported = [
            position[token].logprob if position is not None and token in position else None
            for token, position in zip(token_ids, positions)
        ]
        reported += [None] * (len(token_ids) - len(reported))
    logprobs = checked_logprobs(reported, len(token_ids), request)
    return Completion(token_ids, logprobs, "stop" if output.finish_reason == "stop" else "length")
