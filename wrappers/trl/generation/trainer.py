"""`generator_from_trainer`: the generation backend a `trl.GRPOTrainer` is configured for."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from wrappers.trl import trl_internals
from wrappers.trl.generation.base import Generator, Sampling
from wrappers.trl.generation.transformers import TransformersGenerator
from wrappers.trl.generation.vllm import VLLMGenerator
from wrappers.trl.generation.vllm_server import VLLMClientGenerator


def generator_from_trainer(trainer: Any) -> Generator:
    """The backend a `trl.GRPOTrainer` is configured for: its vLLM engine (colocate or server) when
    `use_vllm` is on, else `model.generate` on the model being trained, with TRL's own settings."""
    args = trainer.args
    if not args.use_vllm:
        return _transformers_for_trainer(trainer)
    sampling = Sampling(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
    )
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
