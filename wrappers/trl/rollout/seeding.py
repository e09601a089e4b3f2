"""Where an episode's start state comes from: a seed derived from the dataset row or prompt.

GRPO compares the G completions of one prompt, so the G episodes of a group must start from the
same state. TRL gives group members identical rows and no group id; deriving the seed from the
row makes them agree, and distinct rows give distinct episodes.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import threading
import warnings
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


def row_seed(row: Mapping[str, Any]) -> int | None:
    """The row's `seed` column (validated), or None when it has none."""
    if row.get(SEED_COLUMN) is None:
        return None
    return episode_seed(row)


def reset_options(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """An `options` column, if the dataset has one, goes to `env.reset(options=...)`.

    Arrow fills keys that a row lacks with None: those are dropped.
    """
    options = row.get("options")
    if not isinstance(options, Mapping):
        return None
    return {key: value for key, value in options.items() if value is not None}


class GroupSeeds:
    """Episode seeds for a stream of rollouts, in the order TRL resets them.

    A row with a `seed` column gets that seed. Rows without one (TRL's placeholder rows, a
    dict-form dataset of `environment` names, one prompt repeated) carry nothing to tell episodes
    apart, so they are told apart by position: TRL hands out each prompt's `group_size` rollouts
    consecutively, so each run of `group_size` seedless resets is one group and shares one seed,
    and the next run gets the next one. With no group size (no trainer in sight) a seedless row's
    seed is a hash of the row, so identical rows start identically: a warning says so when a row
    comes back after another (consecutive equal rows are taken for one group).

    Args:
        name: names the stream in warnings (an env id or an environment name).
    """

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._groups_started = 0
        self._position = 0
        self._group_seed = 0
        self._rows_seen: set[int] = set()
        self._previous_row: int | None = None
        self._warned = False

    def next(self, row: Mapping[str, Any], group_size: int | None) -> int:
        """The seed of the next rollout, whose dataset row is `row`."""
        seed = row_seed(row)
        if seed is not None:
            return seed
        row_hash = episode_seed(dict(row))
        with self._lock:
            if group_size is None:
                if row_hash != self._previous_row:  # consecutive equal rows are taken for one group
                    self._warn_once_if_repeated(
                        row_hash,
                        "identical rows start identical episodes, because the group size is unknown here. "
                        "Pass group_size=num_generations, or give the dataset a `seed` column (episode_dataset).",
                    )
                self._previous_row = row_hash
                return row_hash
            if self._position == 0:
                self._warn_once_if_repeated(
                    row_hash,
                    "groups are told apart by their order in training (each run of group_size rollouts shares "
                    "one start, the next run gets another), so a rerun replays them only in the same order. "
                    "Give the dataset a `seed` column (episode_dataset) to tie episodes to rows.",
                )
                self._groups_started += 1
                self._group_seed = episode_seed({"row": row_hash, "group": self._groups_started})
            self._position = (self._position + 1) % group_size
            return self._group_seed

    def _warn_once_if_repeated(self, row_hash: int, consequence: str) -> None:
        if self._warned:
            return
        if row_hash in self._rows_seen:
            self._warned = True
            warnings.warn(
                f"{self.name}: dataset rows without a `seed` column repeat, so nothing in them tells episodes apart; "
                + consequence,
                UserWarning,
                stacklevel=4,
            )
        self._rows_seen.add(row_hash)


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
