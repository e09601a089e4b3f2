"""Rollouts of agent envs (gymenvs/SWEAgent-v0): the agent's intercepted LLM requests are the prompts.

`make_rollout_func` returns an `AgentRollout` for an env whose class sets `hosts_agent = True`
(`gymenvs/SWEAgent-v0`, `gymenvs/TerminalAgent-v0`). Each episode's agent runs
in its container; every request it sends becomes a generation request, batched with the other live
episodes' requests by `EnvRollout`'s loop, and the sampled completion goes back to the agent as its
reply.

- The first request is rendered with the chat template (its messages and its tools): the prompt.
- When the next request extends the previous one plus the reply (the usual case), only its new
  messages (`info["request"]["new_messages"]`, which the env decides: `gymenvs.container.agent.request`)
  are rendered and appended as tokens (`env_mask` 0): the sampled tokens are never re-tokenised.
- When the agent rewrote its history (`info["request"]["history_rewritten"]`: it truncated, summarised,
  compacted it), the episode starts a new sequence from the full request; the count is the
  `agent_history_rewrites` field (and `AgentRollout.metrics`), never silent.
  `AgentEpisode.token_sequences()` holds every sequence.
  - `AsyncGRPOTrainer` (`EnvRolloutWorker`): **every sequence is a training sample** with the
    episode's advantage and its group's `group_id`: the advantages are computed per episode, over
    the group's episodes, before the episode is split, so the group stays what GRPO compares.
  - `GRPOTrainer(rollout_func=...)`: TRL's contract is one completion per prompt, and it groups the
    rewards of `num_generations` consecutive rows; an extra row would shift every later group and
    lack a dataset row for the reward functions. So the trainer gets the episode's **last sequence**
    (the earlier ones on `AgentEpisode.sequences`). Packing the earlier sequences into the same
    row is not done: the later sequence's tokens would be trained conditioned on tokens the model
    never saw when it sampled them.

The dataset's prompts only seed the episodes: the agent writes its own prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from gymenvs.container.agent.request import AgentRequest
from wrappers.trl.rollout.base import EnvRollout, Prompt
from wrappers.trl.rollout.transcript import ChatRenderer, Episode, is_env_failure


@dataclass
class AgentEpisode(Episode):
    """An `Episode` whose prompt is the agent's own request; `sequences` keeps earlier sequences when
    the agent rewrote its history (`history_rewrites` of them)."""

    history_rewrites: int = 0
    requests: int = 1
    sequences: list[dict[str, list]] = field(default_factory=list)

    def add_env_turn(self, observation: str, reward: float, terminated: bool, truncated: bool,
                     info: Mapping[str, Any], renderer: ChatRenderer, max_completion_length: int) -> None:
        """Append the agent's next request to the episode (or start a new sequence from it), or end it."""
        self.turns += 1
        if terminated or truncated:
            self.reward = float(reward)
            self.error = info.get("error")
            self.record_ending(info, env_failed=is_env_failure(truncated, info))
            self.end("terminated" if terminated else "truncated")
            return
        request = info["request"]
        self.requests += 1
        if request["history_rewritten"]:
            self._restart(request_prompt_ids(renderer, request), request["messages"])
            return
        model_message = self.messages[-1]  # the model's turn, added by add_model_turn
        self.messages.extend(request["new_messages"])
        tokens = renderer.continuation_ids(request["new_messages"], model_message, self.completion_ids[-1])
        if len(self.completion_ids) + len(tokens) >= max_completion_length:  # no room left for the model to answer
            self.end("max_completion_length")
            return
        self._append(tokens, [0.0] * len(tokens), model=False)

    def earlier_sequences(self) -> list[dict[str, list]]:
        return list(self.sequences)

    def token_sequences(self) -> list[dict[str, list]]:
        """Every sequence of the episode: those put aside at history rewrites, then the current one (left out
        when the model sampled nothing in it, as when the agent exited right after rewriting)."""
        current = super().token_sequences()
        return [*self.sequences, *(current if any(self.env_mask) or not self.sequences else [])]

    def _restart(self, prompt_ids: list[int], messages: list[dict[str, Any]]) -> None:
        """Put the current sequence aside and start a new one from a rewritten request."""
        self.sequences.append({"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids,
                               "logprobs": self.logprobs, "env_mask": self.env_mask})
        self.prompt_ids, self.completion_ids, self.logprobs, self.env_mask = prompt_ids, [], [], []
        self.messages = list(messages)
        self.history_rewrites += 1


class AgentRollout(EnvRollout):
    """`make_rollout_func` for agent envs; the options are those of `EnvRollout`."""

    def __init__(self, env_id: str, **options: Any):
        super().__init__(env_id, **options)
        self.metrics = {"episodes": 0, "requests": 0, "history_rewrites": 0}
        self.last_episodes: list[AgentEpisode] = []

    def __call__(self, prompts: list[Prompt], trainer: Any) -> dict[str, list]:
        result = super().__call__(prompts, trainer)
        result["agent_history_rewrites"] = [episode.history_rewrites for episode in self.last_episodes]
        return result

    def run(self, prompts: Sequence[Prompt], generator: Any, tokenizer: Any = None, **options: Any) -> list[Episode]:
        """`EnvRollout.run`, whose episodes are `AgentEpisode`s here (`_start_episode` makes them)."""
        episodes = cast(list[AgentEpisode], super().run(prompts, generator, tokenizer, **options))
        self.last_episodes = episodes
        self.metrics["episodes"] += len(episodes)
        self.metrics["requests"] += sum(episode.requests for episode in episodes if episode.prompt_ids)
        self.metrics["history_rewrites"] += sum(episode.history_rewrites for episode in episodes)
        return list(episodes)

    def _start_episode(self, prompt: Prompt, observation: str, seed: int, info: Mapping[str, Any],
                       renderer: ChatRenderer) -> AgentEpisode:
        if "request" not in info:  # the env failed to reset
            episode = AgentEpisode(seed=seed, prompt_ids=[], messages=[])
            episode.fail_at_start(str(info.get("error", "the env did not reset")), renderer, info)
            return episode
        return AgentEpisode(seed=seed, prompt_ids=request_prompt_ids(renderer, info["request"]),
                            messages=list(info["request"]["messages"]))


def request_prompt_ids(renderer: ChatRenderer, request: AgentRequest) -> list[int]:
    """A request's messages and tools rendered with the chat template, ready for the assistant's turn."""
    return renderer.prompt_ids(list(request["messages"]), request.get("tools"))
