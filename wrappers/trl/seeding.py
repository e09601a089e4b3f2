"""Where an episode's start state comes from: a seed derived from the dataset row or prompt.

GRPO compares the G completions of one prompt, so the G episodes of a group must start from the
same state. TRL gives group members identical rows and no group id; deriving the seed from the
row makes them agree, and distinct rows give distinct episodes.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import Dataset

SEED_COLUMN = "seed"
_SEED_BITS = 63


def episode_seed(row: Mapping[str, Any] | Any) -> int:
    """The row's `seed` column if it has one, else a stable hash of the whole row (or of a prompt).

    The hash is the same in every process and every run (unlike Python's `hash`).
    """
    if isinstance(row, Mapping) and row.get(SEED_COLUMN) is not None:
        seed = row[SEED_COLUMN]
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ValueError(f"seed column: expected a non-negative integer, got {seed!r}")
        return int(seed)
    encoded = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")
    return int.from_bytes(hashlib.sha256(encoded).digest()[:8], "big") >> (64 - _SEED_BITS)


def episode_dataset(num_episodes: int, *, seed: int = 0, system_prompt: str = "") -> Dataset:
    """A training dataset of `num_episodes` distinct episodes, for envs that make their own tasks.

    Each row has a conversational `prompt` and a `seed` column. The env's first observation becomes
    the user message (TRL appends `reset`'s return to the last message). The system message names
    the episode, so prompts differ too: the rollout function (which sees prompts, not rows) derives
    its seeds from them.
    """
    from datasets import Dataset

    if num_episodes < 1:
        raise ValueError(f"num_episodes={num_episodes}: expected at least 1")
    seeds = list(range(seed, seed + num_episodes))
    prompts = [
        [{"role": "system", "content": f"{system_prompt}\nEpisode {s}.".lstrip()}, {"role": "user", "content": ""}]
        for s in seeds
    ]
    return Dataset.from_dict({"prompt": prompts, SEED_COLUMN: seeds})
