"""Generation backends: token ids in; token ids, logprobs and finish reason out (see generation/base.py)."""

from wrappers.trl.generation.base import (
    Completion,
    FinishReason,
    Generator,
    MissingLogprobError,
    Sampling,
    checked_logprobs,
)
from wrappers.trl.generation.trainer import generator_from_trainer
from wrappers.trl.generation.transformers import TransformersGenerator
from wrappers.trl.generation.vllm import VLLMGenerator
from wrappers.trl.generation.vllm_server import VLLMClientGenerator, VLLMServerGenerator

__all__ = [
    "Completion",
    "FinishReason",
    "Generator",
    "MissingLogprobError",
    "Sampling",
    "TransformersGenerator",
    "VLLMClientGenerator",
    "VLLMGenerator",
    "VLLMServerGenerator",
    "checked_logprobs",
    "generator_from_trainer",
]
