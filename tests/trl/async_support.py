"""Envs and helpers for the async GRPO tests: Echo variants that record what they pay out or misbehave."""

from __future__ import annotations

import itertools
import re
import threading
import time
from typing import Any

import gymnasium as gym

from gymenvs.envs.echo import EchoEnv

#: Every NumberedEcho episode's return, by episode number (the thread backend keeps envs in this process).
RETURNS: dict[int, float] = {}
_episode_numbers = itertools.count()
_step_calls = itertools.count(1)
_lock = threading.Lock()


class NumberedEcho(EchoEnv):
    """Echo whose first observation names the episode ("Episode 7.") and which records each episode's return."""

    def _start_episode(self, options: dict[str, Any]) -> str:
        with _lock:
            self._number = next(_episode_numbers)
            RETURNS[self._number] = 0.0
        return f"Episode {self._number}. " + super()._start_episode(options)

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = super().step(action)
        with _lock:
            RETURNS[self._number] += reward
        return observation, reward, terminated, truncated, info


def episode_number(sample: Any) -> int:
    """The episode a RolloutSample came from, read from its prompt."""
    return int(re.search(r"Episode (\d+)\.", sample.prompt[-1]["content"]).group(1))


class FlakyEcho(EchoEnv):
    """Echo in which the `crash_at`-th step call (counted over all instances) raises and the `hang_at`-th sleeps."""

    crash_at: int | None = None

    @staticmethod
    def count_steps_from_here() -> None:
        """Count step calls from 1 again (the counter is shared by every test in the process)."""
        global _step_calls
        with _lock:
            _step_calls = itertools.count(1)

    hang_at: int | None = None
    hang_s: float = 5.0

    def step(self, action: Any):
        with _lock:
            call = next(_step_calls)
        if call == FlakyEcho.crash_at:
            raise RuntimeError("the env crashed")
        if call == FlakyEcho.hang_at:
            time.sleep(FlakyEcho.hang_s)
        return super().step(action)


_ranks: dict[int | None, itertools.count] = {}


class RankedEcho(EchoEnv):
    """Echo that pays, on top of Echo's reward, the episode's rank among the episodes reset with the same
    seed (0, 1, 2, ...), whatever the model writes: the G episodes of a group earn 0, 1, ..., G - 1."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        with _lock:
            self._rank = next(_ranks.setdefault(seed, itertools.count()))
        return super().reset(seed=seed, options=options)

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward + self._rank, terminated, truncated, info


for _name, _cls in (("NumberedEcho", NumberedEcho), ("FlakyEcho", FlakyEcho), ("RankedEcho", RankedEcho)):
    if f"tests/{_name}-v0" not in gym.registry:
        gym.register(id=f"tests/{_name}-v0", entry_point=_cls)


def model_logprobs(engine, input_ids, temperature):
    """Each token's logprob under the served model, given the tokens before it (None for the first)."""
    return engine.prompt_logprobs(list(map(int, input_ids)), temperature)


def packed_logprobs(model, sequences, prompt_length):
    """Score sequences as AsyncGRPOTrainer does: packed into one prefix tree (shared prefixes forwarded
    once), through its fused head; the logprob of every token after the first `prompt_length` of each."""
    import numpy as np
    import torch
    from trl.experimental.async_grpo.packing import TreeRow

    row = TreeRow()
    for index, ids in enumerate(sequences):
        mask = np.array([0] * prompt_length + [1] * (len(ids) - prompt_length))
        sample = {"input_ids": np.array(ids), "completion_mask": mask, "old_log_probs": np.zeros(len(ids))}
        row.add({**sample, "advantage": 0.0, "group_id": index})
    packed = row.pack()
    tree = {key: packed[key] for key in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")}
    tree["tree_max_seqlen_q"], tree["tree_max_seqlen_k"] = packed["tree_max_seqlens"].tolist()
    with torch.no_grad():
        output = model(
            input_ids=packed["input_ids"][None],
            position_ids=packed["position_ids"][None],
            shift_labels=packed["shift_labels"][None],
            fused_lm_head=True,
            **tree,
        )
    return output.log_probs.flatten()[packed["token_index"]], len(packed["input_ids"])
