"""`TransformersGenerator`: `model.generate` on any causal LM (CPU, tests, small models)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from wrappers.trl.generation.base import Completion, Sampling, _check_batch, _cut, checked_logprobs

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel


class TransformersGenerator:
    """Samples with `model.generate` and reads each sampled token's logprob from the processed scores.

    The scores of every step are kept until the batch ends (batch x steps x vocabulary floats): fine
    for small models and CPU runs; use a vLLM backend for large ones.

    Args:
        model: a causal LM (its own `generation_config` supplies the stop tokens unless given).
        pad_token_id: the padding token for left-padded batches.
        stop_token_ids: tokens that end a turn (default: the model's `eos_token_id`s).
        sampling: temperature, top-p, top-k, min-p, repetition penalty.
        generation_config: use this config (TRL's, say) instead of building one from `sampling`.
        model_context: a context manager factory yielding the model to call, such as TRL's
            `unwrap_model_for_generation` for distributed models.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        *,
        pad_token_id: int,
        stop_token_ids: Sequence[int] | None = None,
        sampling: Sampling | None = None,
        generation_config: GenerationConfig | None = None,
        model_context: Callable[[], contextlib.AbstractContextManager[PreTrainedModel]] | None = None,
    ):
        self.model = model
        self.pad_token_id = pad_token_id
        self.stop_token_ids = set(stop_token_ids if stop_token_ids is not None else _eos_ids(model))
        if not self.stop_token_ids:
            raise ValueError("no stop token: pass stop_token_ids or set the model's generation_config.eos_token_id")
        self.generation_config = generation_config or self._config_from(sampling or Sampling())
        self.model_context = model_context or (lambda: contextlib.nullcontext(self.model))

    def _config_from(self, sampling: Sampling) -> GenerationConfig:
        from transformers import GenerationConfig

        return GenerationConfig(
            do_sample=True,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            min_p=sampling.min_p,
            repetition_penalty=sampling.repetition_penalty,
            pad_token_id=self.pad_token_id,
            eos_token_id=sorted(self.stop_token_ids),
        )

    def generate(self, prompts: Sequence[Sequence[int]], max_tokens: Sequence[int]) -> list[Completion]:
        import torch

        _check_batch(prompts, max_tokens)
        config = _with(
            self.generation_config, max_new_tokens=max(max_tokens), output_scores=True, return_dict_in_generate=True
        )
        with self.model_context() as model, torch.no_grad():
            input_ids, attention_mask = _left_pad(prompts, self.pad_token_id, model.device)
            output = model.generate(  # type: ignore[operator]
                input_ids=input_ids, attention_mask=attention_mask, generation_config=config
            )
        new_tokens = output.sequences[:, input_ids.shape[1] :]
        logprobs = _sampled_logprobs(output.scores, new_tokens)
        completions = []
        for request, (tokens, row_logprobs, budget) in enumerate(zip(new_tokens, logprobs, max_tokens)):
            completion = _cut(tokens.tolist(), row_logprobs.tolist(), budget, self.stop_token_ids)
            checked_logprobs(completion.logprobs, len(completion.token_ids), f"prompt {request} of the batch")
            completions.append(completion)
        return completions


def _with(config: GenerationConfig, **overrides: Any) -> GenerationConfig:
    import copy

    config = copy.deepcopy(config)
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def _eos_ids(model: PreTrainedModel) -> list[int]:
    eos = model.generation_config.eos_token_id
    return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)


def _left_pad(prompts: Sequence[Sequence[int]], pad_token_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def _sampled_logprobs(scores: Sequence[torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
    """Per row and step, the log-probability of the sampled token under the processed distribution."""
    import torch

    columns = [
        torch.log_softmax(step_scores.float(), dim=-1).gather(-1, tokens[:, step, None]).squeeze(-1)
        for step, step_scores in enumerate(scores)
    ]
    return torch.stack(columns, dim=1).cpu()
