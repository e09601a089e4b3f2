"""Whose failure ended an episode: the model's, the infrastructure's, or the task's.

A reward of 0 from a broken sandbox teaches a model as much as a real failure does, and silently.
So the last step of every episode says who ended it, in `info`:

- `info["outcome"]`: `"model"` (solved, failed, or the turn limit: the reward is a verdict on the
  agent), `"infra"` (engine error, container died or was OOM-killed, image missing, disk limit,
  grading could not run or timed out, a vector slot crashed or timed out in env code) or
  `"invalid"` (the task itself is broken);
- `info["outcome_reason"]`: a short stable name (`"solved"`, `"turn_limit"`, `"grading_timeout"`, ...);
- `info["outcome_detail"]`: free text for a person.

Only `"model"` episodes carry a reward a trainer may learn from. An episode that ended without these
keys (an env written before them) counts as `"model"`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class EndedBy(StrEnum):
    MODEL = "model"
    INFRA = "infra"
    INVALID = "invalid"


OUTCOME_KEY = "outcome"
REASON_KEY = "outcome_reason"
DETAIL_KEY = "outcome_detail"


class InfraError(RuntimeError):
    """A failure of the infrastructure (the engine, a container, an image): an episode it ends is
    `infra`, with this class's `reason` (the vector env reads it from an exception a slot raised)."""

    reason = "engine_error"


def ending(ended_by: EndedBy | str, reason: str, detail: str = "") -> dict[str, str]:
    """The `info` entries of an episode's last step."""
    return {OUTCOME_KEY: str(EndedBy(ended_by)), REASON_KEY: reason, DETAIL_KEY: detail}


def ended_by(info: dict[str, Any]) -> EndedBy:
    """Who ended the episode whose last step returned `info` (`MODEL` when it does not say)."""
    return EndedBy(info.get(OUTCOME_KEY, EndedBy.MODEL))


def is_trainable(info: dict[str, Any]) -> bool:
    """Whether the reward of the episode that ended with `info` is a verdict on the model."""
    return ended_by(info) is EndedBy.MODEL
