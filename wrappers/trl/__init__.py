"""The TRL bridge: train any registered gymenvs env with `trl.GRPOTrainer`.

Two paths:

- `environment_factory(env_id, **env_kwargs)`: a class for `GRPOTrainer(environment_factory=...)`;
  TRL's own tool loop drives it.
- `make_rollout_func(env_id, ...)`: a `rollout_func` that runs the whole batch's episodes
  concurrently in a `ConcurrentVectorEnv` and returns token-level logprobs and an env mask.

For `trl.experimental.async_grpo.AsyncGRPOTrainer`, `EnvRolloutWorker` plays episodes continuously
against an inference server (`InferenceServer` serves one on CPU; `HTTPWeightTransfer` syncs its
weights; `CPUAsyncGRPOTrainer` runs the trainer without a GPU). See docs/async_grpo.md.

The code is in rooms, one job each: factory.py (`environment_factory`), rollout/ (`make_rollout_func`,
episodes, seeding), generation/ (one backend per module), serve/ (the CPU inference server, its
one HTTP client, weight transfer), async_grpo/ (the async worker and CPU trainer), extras/ (the tiny
offline model tests and examples use), trl_internals.py (every private TRL access).
`wrappers.trl.rollout` and `wrappers.trl.generation` export their modules' public names.

Heavy dependencies (torch, transformers, trl, datasets) are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "environment_factory": "wrappers.trl.factory",
    "EpisodeOverError": "wrappers.trl.factory",
    "make_rollout_func": "wrappers.trl.rollout.env",
    "evaluate_rollouts": "wrappers.trl.rollout.env",
    "EnvRollout": "wrappers.trl.rollout.base",
    "env_reward": "wrappers.trl.rollout.base",
    "AgentRollout": "wrappers.trl.rollout.agent",
    "Episode": "wrappers.trl.rollout.transcript",
    "episode_seed": "wrappers.trl.rollout.seeding",
    "episode_dataset": "wrappers.trl.rollout.seeding",
    "GroupSeeds": "wrappers.trl.rollout.seeding",
    "Completion": "wrappers.trl.generation.base",
    "Sampling": "wrappers.trl.generation.base",
    "Generator": "wrappers.trl.generation.base",
    "TransformersGenerator": "wrappers.trl.generation.transformers",
    "VLLMGenerator": "wrappers.trl.generation.vllm",
    "VLLMServerGenerator": "wrappers.trl.generation.vllm_server",
    "VLLMClientGenerator": "wrappers.trl.generation.vllm_server",
    "EnvRolloutWorker": "wrappers.trl.async_grpo.worker",
    "CPUAsyncGRPOTrainer": "wrappers.trl.async_grpo.cpu_trainer",
    "InferenceServer": "wrappers.trl.serve.inference_server",
    "HTTPWeightTransfer": "wrappers.trl.serve.weight_transfer",
    "tiny_model": "wrappers.trl.extras.tiny_model",
    "CPU_TRAINING_ARGS": "wrappers.trl.extras.tiny_model",
    "tiny_tokenizer": "wrappers.trl.extras.tiny_model",
    "imitate": "wrappers.trl.extras.tiny_model",
    "teach_tool_calls": "wrappers.trl.extras.tiny_model",
    "tool_call_text": "wrappers.trl.extras.tiny_model",
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
