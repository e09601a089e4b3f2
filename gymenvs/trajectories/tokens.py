"""The tokens of a trajectory, by who produced them: the prompt, the policy (sampled) and the env.

ATIF keeps tokens on agent steps' `metrics`. Read in step order:

- `prompt_token_ids` of the first agent step that has them: the prompt;
- `completion_token_ids` (with `logprobs`): what the policy sampled in that turn, except the positions its
  `extra["env_mask"]` (as long as they are) marks 0, which the env wrote;
- `extra["env_token_ids"]`: what the env and the chat template wrote after the turn (gymenvs rollouts keep them
  there: `wrappers/trl/rollout/trajectories.py`);
- a later step's `prompt_token_ids` (producers that give each turn its whole prompt): when they continue the
  sequence so far, the new tail is the env's; when they do not, the history was rewritten and a new sample starts.

A gymenvs rollout of an agent whose agent rewrote its history trained on several sequences; the steps hold the
last one (its messages and tokens), and `extra["gymenvs"]["earlier_sequences"]` the ones before it, each as the
trainer got it (`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`): they come first.

`samples(trajectory)` returns the samples, each a list of `Segment`s in order, and `training_sequences(trajectory)`
each sample as the trainer got it. The env mask of a sample is 1 exactly on its policy segments' tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gymenvs.trajectories.recorder import EXTRA_KEY

if TYPE_CHECKING:
    import atif

#: Where gymenvs rollouts keep, on an agent step's `metrics.extra`, the tokens the env wrote after the turn.
ENV_TOKENS = "env_token_ids"
ENV_MASK = "env_mask"
#: Where gymenvs rollouts keep, in `extra["gymenvs"]`, the sequences an agent episode trained on before its last.
EARLIER_SEQUENCES = "earlier_sequences"
Producer = Literal["prompt", "policy", "env"]


@dataclass
class Segment:
    """A run of tokens one producer wrote during one step (`step_id`); `logprobs` only for the policy's."""

    producer: Producer
    step_id: int | None  # None in an earlier sequence, whose steps the trajectory does not hold
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

    def add(self, producer: Producer, step_id: int | None, token_ids: Sequence[int],
            logprobs: Sequence[float] | None = None) -> None:
        if token_ids:
            self.segments.append(Segment(producer, step_id, list(token_ids), None if logprobs is None else list(logprobs)))

    def trained(self) -> dict[str, list]:
        """The sample as the trainer got it: `prompt_ids`, `completion_ids`, `logprobs` (0.0 on the env's tokens) and
        `env_mask`."""
        after = [segment for segment in self.segments if segment.producer != "prompt"]
        return {
            "prompt_ids": [token for segment in self.segments if segment.producer == "prompt" for token in segment.token_ids],
            "completion_ids": [token for segment in after for token in segment.token_ids],
            "logprobs": [logprob for segment in after for logprob in segment.logprobs or [0.0] * len(segment.token_ids)],
            "env_mask": self.env_mask,
        }


def training_sequences(trajectory: atif.Trajectory) -> list[dict[str, list]]:
    """Each token sequence `trajectory` holds, as the trainer got it (`Sample.trained`), in order."""
    return [sample.trained() for sample in samples(trajectory)]


def samples(trajectory: atif.Trajectory) -> list[Sample]:
    """The token samples of `trajectory` (the module docstring); none when it holds no token ids."""
    episode = (trajectory.extra or {}).get(EXTRA_KEY) or {}
    found = [_earlier(sequence) for sequence in episode.get(EARLIER_SEQUENCES, [])]
    first = len(found)
    sequence: list[int] = []
    for step in trajectory.steps:
        metrics = step.metrics
        if step.source != "agent" or metrics is None or not metrics.completion_token_ids:
            continue
        prompt = list(metrics.prompt_token_ids or [])
        if len(found) == first or (prompt and prompt[:len(sequence)] != sequence):
            found.append(Sample())
            found[-1].add("prompt", step.step_id, prompt)
            sequence = list(prompt)
        elif len(prompt) > len(sequence):
            found[-1].add("env", step.step_id, prompt[len(sequence):])
            sequence = list(prompt)
        sequence += _add_turn(found[-1], step.step_id, metrics)
    return found


def _earlier(sequence: dict[str, list]) -> Sample:
    """An earlier sequence of a rollout, split into runs by its env mask."""
    sample = Sample()
    sample.add("prompt", None, sequence["prompt_ids"])
    completion, logprobs, mask = sequence["completion_ids"], sequence["logprobs"], sequence["env_mask"]
    for start, end in _runs(mask):
        policy = bool(mask[start])
        sample.add("policy" if policy else "env", None, completion[start:end], logprobs[start:end] if policy else None)
    return sample


def _runs(mask: Sequence[int]) -> list[tuple[int, int]]:
    """The (start, end) of each run of equal values in `mask`."""
    starts = [index for index in range(len(mask)) if index == 0 or mask[index] != mask[index - 1]]
    return list(zip(starts, [*starts[1:], len(mask)]))


def _add_turn(sample: Sample, step_id: int, metrics: atif.Metrics) -> list[int]:
    """Add one turn's sampled tokens (split by its env mask, if any) and the env's after them; the tokens added."""
    completion = list(metrics.completion_token_ids or [])
    logprobs = list(metrics.logprobs) if metrics.logprobs is not None and len(metrics.logprobs) == len(completion) else None
    extra = metrics.extra or {}
    mask = extra.get(ENV_MASK)
    if not isinstance(mask, list) or len(mask) != len(completion):
        mask = [1] * len(completion)
    for start, end in _runs(mask):
        policy = bool(mask[start])
        sample.add("policy" if policy else "env", step_id, completion[start:end],
                   logprobs[start:end] if logprobs is not None and policy else None)
    env = [int(token) for token in extra.get(ENV_TOKENS) or []]
    sample.add("env", step_id, env)
    return completion + env
