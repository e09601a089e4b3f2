"""The tokens of a trajectory, by who produced them: the prompt, the policy (sampled) and the env.

ATIF keeps tokens on agent steps' `metrics`. Read in step order:

- `prompt_token_ids` of the first agent step that has them: the prompt;
- `completion_token_ids` (with `logprobs`): what the policy sampled in that turn, except the positions its
  `extra["env_mask"]` (as long as they are) marks 0, which the env wrote;
- `extra["env_token_ids"]`: what the env and the chat template wrote after the turn (gymenvs rollouts keep them
  there: `wrappers/trl/rollout/trajectories.py`);
- a later step's `prompt_token_ids` (producers that give each turn its whole prompt): when they continue the
  sequence so far, the new tail is the env's; when they do not, the history was rewritten and a new sample starts.

`samples(trajectory)` returns the samples, each a list of `Segment`s in order. The env mask of a sample is 1
exactly on its policy segments' tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import atif

#: Where gymenvs rollouts keep, on an agent step's `metrics.extra`, the tokens the env wrote after the turn.
ENV_TOKENS = "env_token_ids"
ENV_MASK = "env_mask"
Producer = Literal["prompt", "policy", "env"]


@dataclass
class Segment:
    """A run of tokens one producer wrote during one step (`step_id`); `logprobs` only for the policy's."""

    producer: Producer
    step_id: int
    token_ids: list[int]
    logprobs: list[float] | None = None


@dataclass
class Sample:
    """One token sequence, as it was trained on (or would be): its segments in order."""

    segments: list[Segment] = field(default_factory=list)

    @property
    def token_ids(self) -> list[int]:
        return [token for segment in self.segments for token in segment.token_ids]

    @property
    def env_mask(self) -> list[int]:
        """1 on each token the policy sampled, 0 on the env's; the prompt has none (as TRL's `env_mask`)."""
        return [int(segment.producer == "policy") for segment in self.segments if segment.producer != "prompt"
                for _ in segment.token_ids]

    def add(self, producer: Producer, step_id: int, token_ids: Sequence[int], logprobs: Sequence[float] | None = None):
        if token_ids:
            self.segments.append(Segment(producer, step_id, list(token_ids), None if logprobs is None else list(logprobs)))


def has_tokens(trajectory: atif.Trajectory) -> bool:
    """Whether some agent step holds the tokens it sampled."""
    return any(step.metrics is not None and step.metrics.completion_token_ids for step in trajectory.steps)


def samples(trajectory: atif.Trajectory) -> list[Sample]:
    """The token samples of `trajectory` (the module docstring); none when it holds no token ids."""
    found: list[Sample] = []
    sequence: list[int] = []
    for step in trajectory.steps:
        metrics = step.metrics
        if step.source != "agent" or metrics is None or not metrics.completion_token_ids:
            continue
        prompt = list(metrics.prompt_token_ids or [])
        if not found or (prompt and prompt[:len(sequence)] != sequence):
            found.append(Sample())
            found[-1].add("prompt", step.step_id, prompt)
            sequence = list(prompt)
        elif len(prompt) > len(sequence):
            found[-1].add("env", step.step_id, prompt[len(sequence):])
            sequence = list(prompt)
        sequence += _add_turn(found[-1], step.step_id, metrics)
    return found


def _add_turn(sample: Sample, step_id: int, metrics: atif.Metrics) -> list[int]:
    """Add one turn's sampled tokens (split by its env mask, if any) and the env's after them; the tokens added."""
    completion = list(metrics.completion_token_ids or [])
    logprobs = list(metrics.logprobs) if metrics.logprobs is not None and len(metrics.logprobs) == len(completion) else None
    extra = metrics.extra or {}
    mask = extra.get(ENV_MASK)
    if not isinstance(mask, list) or len(mask) != len(completion):
        mask = [1] * len(completion)
    start = 0
    for end in range(1, len(completion) + 1):
        if end == len(completion) or mask[end] != mask[start]:
            producer: Producer = "policy" if mask[start] else "env"
            sample.add(producer, step_id, completion[start:end],
                       logprobs[start:end] if logprobs is not None and producer == "policy" else None)
            start = end
    env = [int(token) for token in extra.get(ENV_TOKENS) or []]
    sample.add("env", step_id, env)
    return completion + env
