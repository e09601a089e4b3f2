"""The TRL bridge: train any registered gymenvs env with `trl.GRPOTrainer`.

Two paths:

- `environment_factory(env_id, **env_kwargs)`: a class for `GRPOTrainer(environment_factory=...)`;
  TRL's own tool loop drives it.
- `make_rollout_func(env_id, ...)`: a `rollout_func` that runs the whole batch's episodes
  concurrently in a `ConcurrentVectorEnv` and returns token-level logprobs and an env mask.

For `trl.experimental.async_grpo.AsyncGRPOTrainer`, `EnvRolloutWorker` plays episodes continuously
against an inference server (`InferenceServer` serves one on CPU; `HTTPWeightTransfer` syncs its
weights; `CPUAsyncGRPOTrainer` runs the trainer without a GPU). See docs/async_grpo.md.

Heavy dependencies (torch, transformers, trl, datasets) are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "environment_factory": "wrappers.trl.factory",
    "EpisodeOverError": "wrappers.trl.factory",
    "make_rollout_func": "wrappers.trl.rollout",
    "EnvRollout": "wrappers.trl.rollout",
    "env_reward": "wrappers.trl.rollout",
    "evaluate": "wrappers.trl.rollout",
    "Episode": "wrappers.trl.transcript",
    "episode_seed": "wrappers.trl.seeding",
    "episode_dataset": "wrappers.trl.seeding",
    "Completion": "wrappers.trl.generation",
    "Sampling": "wrappers.trl.generation",
    "Generator": "wrappers.trl.generation",
    "TransformersGenerator": "wrappers.trl.generation",
    "VLLMGenerator": "wrappers.trl.generation",
    "VLLMServerGenerator": "wrappers.trl.generation",
    "EnvRolloutWorker": "wrappers.trl.async_worker",
    "CPUAsyncGRPOTrainer": "wrappers.trl.cpu_async_grpo",
    "InferenceServer": "wrappers.trl.inference_server",
    "HTTPWeightTransfer": "wrappers.trl.weight_transfer",
    "tiny_model": "wrappers.trl.offline_model",
    "CPU_TRAINING_ARGS": "wrappers.trl.offline_model",
    "tiny_tokenizer": "wrappers.trl.offline_model",
    "imitate": "wrappers.trl.offline_model",
    "teach_tool_calls": "wrappers.trl.offline_model",
    "tool_call_text": "wrappers.trl.offline_model",
    "VLLMClientGenerator": "wrappers.trl.generation",
    "GroupSeeds": "wrappers.trl.seeding",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
