"""Rollouts: whole batches of episodes played concurrently, with token-level logprobs, for GRPO.

- base.py: `EnvRollout`, the episode loop every rollout shares, and `Prompt`;
- env.py: `make_rollout_func`, which picks the rollout an env needs, and `evaluate_rollouts`;
- agent.py: `AgentRollout`, for envs whose class sets `hosts_agent` (the agent's requests are the prompts);
- transcript.py: an `Episode`'s tokens and messages; seeding.py: where episodes' seeds come from.

This package exports the public names of its modules.
"""

from wrappers.trl.rollout.base import (
    ENVIRONMENT_COLUMN,
    EnvRollout,
    EnvSpec,
    EpisodeStart,
    Prompt,
    RolloutEnv,
    env_reward,
)
from wrappers.trl.rollout.env import evaluate_rollouts, make_rollout_func

__all__ = [
    "ENVIRONMENT_COLUMN",
    "EnvRollout",
    "EnvSpec",
    "EpisodeStart",
    "Prompt",
    "RolloutEnv",
    "env_reward",
    "evaluate_rollouts",
    "make_rollout_func",
]
