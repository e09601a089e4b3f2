"""Generation backends behind one small protocol: token ids in; token ids, logprobs and finish reason out.

- `TransformersGenerator`: `model.generate` on any causal LM (CPU, tests, small models).
- `VLLMGenerator`: an in-process `vllm.LLM` with `SamplingParams(logprobs=0)`.
- `VLLMServerGenerator`: a vLLM server's OpenAI-compatible `/v1/completions`, with token-id prompts,
  `return_token_ids` and `logprobs=0` (for use without a trainer; needs only httpx).
- `VLLMClientGenerator`: the same endpoint through `trl`'s own `VLLMClient`, the client a trainer
  in vLLM server mode already holds (and syncs weights through).

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

import contextlib
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from wrappers.trl import trl_internals

if TYPE_CHECKING:
    import torch
    from transformers import GenerationConfig, PreTrainedModel

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


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters, with the meanings TRL's GRPOConfig gives them (0 / 1.0 / None = off)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float | None = None
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature}: sampling needs a temperature > 0")


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


# -- transformers -----------------------------------------------------------------------


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
            output = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
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


# -- vLLM in process --------------------------------------------------------------------


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
            **_vllm_sampling(self.sampling),
            "n": 1,
            "max_tokens": max_tokens,
            "logprobs": 0,
            **self.extra_sampling_params,
        }


def _vllm_sampling(sampling: Sampling) -> dict[str, Any]:
    return {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "min_p": 0.0 if sampling.min_p is None else sampling.min_p,
        "repetition_penalty": sampling.repetition_penalty,
    }


def _from_vllm_output(output: Any, request: str = "request") -> Completion:
    """A `vllm.CompletionOutput` with `logprobs=0`: each position maps the sampled token to its `Logprob`."""
    token_ids = list(output.token_ids)
    positions = output.logprobs
    logprobs = None
    if positions is not None:
        logprobs = [
            position[token].logprob if position is not None and token in position else None
            for token, position in zip(token_ids, positions)
        ]
        logprobs += [None] * (len(token_ids) - len(logprobs))
    logprobs = checked_logprobs(logprobs, len(token_ids), request)
    return Completion(token_ids, logprobs, "stop" if output.finish_reason == "stop" else "length")


# -- vLLM server ------------------------------------------------------------------------


class VLLMServerGenerator:
    """Samples from a vLLM server through its OpenAI-compatible `/v1/completions` endpoint.

    The whole batch goes in one request, prompts as token-id lists, with `return_token_ids` and
    `logprobs=0` (start the server with `--logprobs-mode processed_logprobs`). One `max_tokens`
    serves the batch (the largest budget); a completion that outruns its own budget is cut here.

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
        import httpx

        self.base_url = base_url.rstrip("/")
        self.sampling = sampling or Sampling()
        self.stop_token_ids = set(stop_token_ids)
        self.extra_request_fields = dict(extra_request_fields or {})
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s)
        self._finalizer = weakref.finalize(self, self._client.close)
        try:
            self.model = model or self._first_model()
        except BaseException:
            self.close()
            raise

    def _first_model(self) -> str:
        response = self._client.get("/v1/models")
        response.raise_for_status()
        models = response.json().get("data") or []
        if not models:
            raise RuntimeError(f"the vLLM server at {self.base_url} lists no model under /v1/models")
        return models[0]["id"]

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
            **_vllm_sampling(self.sampling),
            **self.extra_request_fields,
        }
        response = self._client.post("/v1/completions", json=request)
        if response.status_code != 200:
            raise RuntimeError(
                f"vLLM server {self.base_url}/v1/completions answered {response.status_code}: {response.text[:500]}"
            )
        choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise RuntimeError(f"vLLM server returned {len(choices)} choices for {len(prompts)} prompts")
        return [self._completion(choice, budget) for choice, budget in zip(choices, max_tokens)]

    def _completion(self, choice: dict[str, Any], max_tokens: int) -> Completion:
        token_ids = choice.get("token_ids")
        request = f"prompt {choice['index']} of the batch sent to {self.base_url}/v1/completions"
        if token_ids is None:
            raise RuntimeError(f"{request}: no token_ids (vLLM >= 0.10.2 is needed for return_token_ids)")
        logprobs = checked_logprobs((choice.get("logprobs") or {}).get("token_logprobs"), len(token_ids), request)
        finished = "stop" if choice.get("finish_reason") == "stop" else "length"
        if len(token_ids) <= max_tokens:
            return Completion(list(token_ids), logprobs, finished)
        return _cut(list(token_ids), logprobs, max_tokens, self.stop_token_ids)

    def close(self) -> None:
        """Close the HTTP client (also done when the generator is collected)."""
        self._finalizer()

    def __enter__(self) -> VLLMServerGenerator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


# -- vLLM server through trl's VLLMClient -----------------------------------------------


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
            **_vllm_sampling(self.sampling),
        )
        all_logprobs = output.get("logprobs") or [None] * len(prompts)
        completions = []
        for index, (token_ids, positions, budget) in enumerate(zip(output["completion_ids"], all_logprobs, max_tokens)):
            token_ids = list(token_ids)
            sampled = None if positions is None else [position[0] if position else None for position in positions]
            logprobs = checked_logprobs(sampled, len(token_ids), f"prompt {index} of the batch sent by VLLMClient")
            completions.append(_cut(token_ids, logprobs, budget, self.stop_token_ids))
        return completions


# -- choosing the backend a GRPOTrainer uses -------------------------------------------


def generator_from_trainer(trainer: Any) -> Generator:
    """The backend a `trl.GRPOTrainer` is configured for: its vLLM engine (colocate or server) when
    `use_vllm` is on, else `model.generate` on the model being trained, with TRL's own settings."""
    args = trainer.args
    if not args.use_vllm:
        return _transformers_for_trainer(trainer)
    sampling = Sampling(args.temperature, args.top_p, args.top_k, args.min_p, args.repetition_penalty)
    extra = dict(args.generation_kwargs or {})
    if args.vllm_mode == "colocate":
        if args.vllm_enable_sleep_mode or args.vllm_tensor_parallel_size > 1:
            raise ValueError(
                "make_rollout_func supports vLLM colocate mode without sleep mode and with "
                f"vllm_tensor_parallel_size=1 (got vllm_enable_sleep_mode={args.vllm_enable_sleep_mode}, "
                f"vllm_tensor_parallel_size={args.vllm_tensor_parallel_size})"
            )
        return VLLMGenerator(trl_internals.colocated_llm(trainer), sampling=sampling, extra_sampling_params=extra)
    return VLLMClientGenerator(
        trl_internals.server_client(trainer),
        sampling=sampling,
        stop_token_ids=trainer.eos_token_ids,
        generation_kwargs=extra,
    )


def _transformers_for_trainer(trainer: Any) -> TransformersGenerator:
    from trl.models import unwrap_model_for_generation

    @contextlib.contextmanager
    def unwrapped() -> Iterator[Any]:
        # As GRPOTrainer's own generation does: gather sharded weights, apply its generation kwargs.
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                generation_kwargs=trainer.generation_kwargs,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            trl_internals.full_parameters(trainer),
        ):
            yield model

    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    return TransformersGenerator(
        trainer.model,
        pad_token_id=tokenizer.pad_token_id,
        stop_token_ids=trainer.eos_token_ids,
        generation_config=trainer.generation_config,
        model_context=unwrapped,
    )
