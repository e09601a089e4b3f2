"""Rollouts of agent envs (gymenvs/SWEAgent-v0): the agent's intercepted LLM requests are the prompts.

`make_rollout_func("gymenvs/SWEAgent-v0", ...)` returns an `AgentRollout`. Each episode's agent runs
in its container; every request it sends becomes a generation request, batched with the other live
episodes' requests, and the sampled completion goes back to the agent as its reply.

- The first request is rendered with the chat template (its messages and its tools): the prompt.
- When the next request extends the previous one plus the reply (the usual case), only its new
  messages are rendered and appended as tokens (`env_mask` 0): the sampled tokens are never
  re-tokenised.
- When the agent rewrote its history (truncated, summarised, reformatted it), the episode starts a
  new sequence from the full request. The trainer gets the episode's last sequence; the earlier
  ones stay on `AgentEpisode.sequences`, and the count is the `agent_history_rewrites` field (and
  `AgentRollout.metrics`), never silent.

The dataset's prompts only seed the episodes: the agent writes its own prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wrappers.trl.rollout import EnvRollout, Prompt, _slot_info
from wrappers.trl.transcript import ChatRenderer, Episode

#: Envs whose observations are an agent's LLM requests (`info["request"]`).
AGENT_ENV_IDS = frozenset({"gymenvs/SWEAgent-v0"})


@dataclass
class AgentEpisode(Episode):
    """An `Episode` whose prompt is the agent's own request; `sequences` keeps earlier sequences when
    the agent rewrote its history (`history_rewrites` of them)."""

    history_rewrites: int = 0
    sequences: list[dict[str, list]] = field(default_factory=list)
    #: The messages of the request the model is answering.
    request_messages: list[dict[str, Any]] = field(default_factory=list)

    def restart(self, prompt_ids: list[int], messages: list[dict[str, Any]]) -> None:
        """Put the current sequence aside and start a new one from a rewritten request."""
        self.sequences.append({"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids,
                               "logprobs": self.logprobs, "env_mask": self.env_mask})
        self.prompt_ids, self.completion_ids, self.logprobs, self.env_mask = prompt_ids, [], [], []
        self.request_messages = messages
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

    def _play(self, prompts: list[Prompt], seeds: list[int], generator: Any, renderer: ChatRenderer,
              max_length: int) -> list[AgentEpisode]:
        vector_env = self._vector_env_for(len(prompts))
        observations, infos = vector_env.reset(seed=seeds)
        episodes = [self._start(seed, _slot_info(infos, index), renderer) for index, seed in enumerate(seeds)]
        while live := [index for index, episode in enumerate(episodes) if not episode.finished]:
            budgets = [self._turn_budget(episodes[index], max_length) for index in live]
            completions = generator.generate([episodes[index].input_ids for index in live], budgets)
            actions: list[str | None] = [None] * len(episodes)
            for index, completion in zip(live, completions):
                actions[index] = episodes[index].add_model_turn(completion, renderer, max_length)
            if all(action is None for action in actions):
                continue
            observations, rewards, terminated, truncated, infos = vector_env.step(actions)
            for index, action in enumerate(actions):
                if action is not None:
                    self._after_reply(episodes[index], float(rewards[index]), bool(terminated[index]),
                                      bool(truncated[index]), _slot_info(infos, index), renderer, max_length)
        self.last_episodes = episodes
        self.metrics["episodes"] += len(episodes)
        self.metrics["history_rewrites"] += sum(episode.history_rewrites for episode in episodes)
        return episodes

    def _start(self, seed: int, info: Mapping[str, Any], renderer: ChatRenderer) -> AgentEpisode:
        if "request" not in info:  # the env failed to reset
            episode = AgentEpisode(seed=seed, prompt_ids=[], messages=[])
            episode.fail_at_start(str(info.get("error", "the env did not reset")), renderer)
            return episode
        messages = info["request"]["messages"]
        self.metrics["requests"] += 1
        return AgentEpisode(seed=seed, prompt_ids=request_prompt_ids(renderer, info["request"]),
                            messages=list(messages), request_messages=messages)

    def _after_reply(self, episode: AgentEpisode, reward: float, terminated: bool, truncated: bool,
                     info: Mapping[str, Any], renderer: ChatRenderer, max_length: int) -> None:
        """Append the agent's next request to the episode, or end it."""
        episode.turns += 1
        if terminated or truncated:
            episode.reward = reward
            episode.error = info.get("error")
            episode.end("terminated" if terminated else "truncated")
            return
        request = info["request"]
        messages = request["messages"]
        self.metrics["requests"] += 1
        if info.get("history_rewritten"):
            episode.restart(request_prompt_ids(renderer, request), messages)
            episode.messages = list(messages)
            return
        model_text = episode.messages[-1]["content"]  # the model's turn, added by add_model_turn
        new = messages[len(episode.request_messages) + 1 :]
        episode.messages.extend(new)
        episode.request_messages = messages
        tokens = renderer.continuation_ids(new, model_text)
        if len(episode.completion_ids) + len(tokens) >= max_length:  # no room left for the model to answer
            episode.end("max_completion_length")
            return
        episode._append(tokens, [0.0] * len(tokens), model=False)


def request_prompt_ids(renderer: ChatRenderer, request: Mapping[str, Any]) -> list[int]:
    """A request's messages and tools rendered with the chat template, ready for the assistant's turn."""
    return ChatRenderer(renderer.tokenizer, request.get("tools") or None).prompt_ids(list(request["messages"]))


def is_agent_env(env_id: str) -> bool:
    return env_id in AGENT_ENV_IDS

