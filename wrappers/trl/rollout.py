"""`make_rollout_func`: episodes of a whole batch run concurrently, with token-level logprobs, for GRPO.

TRL's own `environment_factory` loop runs env tools one rollout after another. Here every episode
of the batch lives in one slot of a `ConcurrentVectorEnv`; each turn, the model generates for all
episodes still running in one batch, and the env steps them all at once. The same loop evaluates
a model without a trainer (`EnvRollout.run`, `evaluate`).
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from gymenvs.core.images import has_image, text_view
from wrappers.trl.seeding import episode_seed
from wrappers.trl.transcript import ChatRenderer, Episode, first_message_with
from wrappers.vector import ConcurrentVectorEnv

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from wrappers.trl.generation import Generator

Prompt = list[dict[str, Any]] | str
logger = logging.getLogger(__name__)


def env_reward(
    completions: Sequence[Any] | None = None, env_reward: Sequence[float] | None = None, **kwargs: Any
) -> list[float]:
    """Reward function for `GRPOTrainer(reward_funcs=...)`: each episode's total env reward, as the
    rollout function returned it in its `env_reward` field."""
    if env_reward is None:
        raise ValueError("no env_reward field: env_reward scores episodes from make_rollout_func's rollout_func")
    return [float(value) for value in env_reward]


class EnvRollout:
    """A `rollout_func` for `GRPOTrainer`, and a trainer-free episode runner; built by `make_rollout_func`,
    whose docstring describes the options."""

    reward_func = staticmethod(env_reward)

    def __init__(
        self,
        env_id: str,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        max_completion_length: int | None = None,
        max_tokens_per_turn: int | None = None,
        show_tools: bool = True,
        backend: str = "thread",
        max_workers: int | None = None,
        step_timeout_s: float | None = None,
    ):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.tokenizer = tokenizer
        self.max_completion_length = _positive("max_completion_length", max_completion_length)
        self.max_tokens_per_turn = _positive("max_tokens_per_turn", max_tokens_per_turn)
        self.vector_options = {"backend": backend, "max_workers": max_workers, "step_timeout_s": step_timeout_s}
        self.tools, self.accepts_free_text = _describe_env(env_id, self.env_kwargs)
        self.show_tools = show_tools
        self._vector_env: ConcurrentVectorEnv | None = None
        self._finalizer: weakref.finalize | None = None
        self._trainer_generator: tuple[Any, Generator] | None = None
        self._told_about_images = False
        if tokenizer is not None and max_completion_length is not None:
            self._check_budget(tokenizer, max_completion_length)

    # -- the TRL rollout_func -----------------------------------------------------------

    def __call__(self, prompts: list[Prompt], trainer: Any) -> dict[str, list]:
        """Run one episode per prompt (TRL passes each prompt `num_generations` times in a row)."""
        processing_class = trainer.processing_class
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        episodes = self.run(
            prompts,
            self._generator_for(trainer),
            tokenizer,
            max_completion_length=self.max_completion_length or trainer.args.max_completion_length,
        )
        return {
            "prompt_ids": [episode.prompt_ids for episode in episodes],
            "completion_ids": [episode.completion_ids for episode in episodes],
            "logprobs": [episode.logprobs for episode in episodes],
            "env_mask": [episode.env_mask for episode in episodes],
            "env_reward": [episode.reward for episode in episodes],
            "env_turns": [episode.turns for episode in episodes],
        }

    def _generator_for(self, trainer: Any) -> Generator:
        from wrappers.trl.generation import generator_from_trainer

        if self._trainer_generator is None or self._trainer_generator[0] is not trainer:
            self._trainer_generator = (trainer, generator_from_trainer(trainer))
        return self._trainer_generator[1]

    # -- episodes without a trainer -----------------------------------------------------

    def run(
        self,
        prompts: Sequence[Prompt],
        generator: Generator,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        seeds: Sequence[int] | None = None,
        max_completion_length: int | None = None,
    ) -> list[Episode]:
        """Play one episode per prompt, all at once, and return them (tokens, messages, rewards).

        Each episode's seed is `seeds[i]` or a stable hash of its prompt, so equal prompts start
        from the same state. The env's first observation is appended to the prompt's last message.
        """
        tokenizer = tokenizer or self.tokenizer
        max_completion_length = max_completion_length or self.max_completion_length
        if tokenizer is None or max_completion_length is None:
            raise ValueError("run() needs a tokenizer and a max_completion_length (here or in the constructor)")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        self._check_budget(tokenizer, max_completion_length)
        renderer = ChatRenderer(tokenizer, self.tools if self.show_tools else None)
        seeds = list(seeds) if seeds is not None else [episode_seed(prompt) for prompt in prompts]
        return self._play(list(prompts), seeds, generator, renderer, max_completion_length)

    def _play(
        self, prompts: list[Prompt], seeds: list[int], generator: Generator, renderer: ChatRenderer, max_length: int
    ) -> list[Episode]:
        vector_env = self._vector_env_for(len(prompts))
        observations, infos = vector_env.reset(seed=seeds)
        observations = self._text_views(observations)
        episodes = [
            self._start_episode(prompt, observation, seed, _slot_info(infos, index), renderer)
            for index, (prompt, observation, seed) in enumerate(zip(prompts, observations, seeds))
        ]
        while live := [index for index, episode in enumerate(episodes) if not episode.finished]:
            budgets = [self._turn_budget(episodes[index], max_length) for index in live]
            completions = generator.generate([episodes[index].input_ids for index in live], budgets)
            actions: list[str | None] = [None] * len(episodes)
            for index, completion in zip(live, completions):
                actions[index] = episodes[index].add_model_turn(completion, renderer, max_length)
            if all(action is None for action in actions):
                continue
            observations, rewards, terminated, truncated, infos = vector_env.step(actions)
            observations = self._text_views(observations)
            for index, action in enumerate(actions):
                if action is not None:
                    episodes[index].add_env_turn(
                        observations[index],
                        rewards[index],
                        terminated[index],
                        truncated[index],
                        _slot_info(infos, index),
                        renderer,
                        max_length,
                    )
        return episodes

    def _start_episode(
        self, prompt: Prompt, observation: str, seed: int, info: Mapping[str, Any], renderer: ChatRenderer
    ) -> Episode:
        """The episode a reset slot begins (agent rollouts build theirs from the agent's request)."""
        return _start(prompt, observation, seed, info, renderer)

    def _text_views(self, observations: Sequence[Any]) -> list[Any]:
        """The text of each observation: the model here reads text only, so images are dropped (said once)."""
        if not self._told_about_images and any(has_image(observation) for observation in observations):
            logger.warning(
                "%s returns images; make_rollout_func plays text-only models, so it feeds them each observation's "
                "text view and drops the images (use environment_factory for a vision model)",
                self.env_id,
            )
            self._told_about_images = True
        return [text_view(observation) if has_image(observation) else observation for observation in observations]

    def _turn_budget(self, episode: Episode, max_length: int) -> int:
        remaining = max_length - len(episode.completion_ids)
        return min(remaining, self.max_tokens_per_turn) if self.max_tokens_per_turn else remaining

    def _vector_env_for(self, num_envs: int) -> ConcurrentVectorEnv:
        if self._vector_env is not None and self._vector_env.num_envs != num_envs:
            self.close()
        if self._vector_env is None:
            make = functools.partial(gym.make, self.env_id, **self.env_kwargs)
            self._vector_env = ConcurrentVectorEnv(
                [make] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED, **self.vector_options
            )
            self._finalizer = weakref.finalize(self, _close_quietly, self._vector_env)
        return self._vector_env

    # -- checks -------------------------------------------------------------------------

    def _check_budget(self, tokenizer: PreTrainedTokenizerBase, max_completion_length: int) -> None:
        """A clear error when `max_completion_length` cannot hold even the shortest action plus its
        end-of-turn token: every episode would end before the env sees an action."""
        shortest, example = _shortest_action(tokenizer, self.tools, self.accepts_free_text)
        if max_completion_length < shortest:
            raise ValueError(
                f"max_completion_length={max_completion_length} is too small for one turn of {self.env_id}: "
                f"its shortest action ({example!r} plus the end-of-turn token) takes {shortest} tokens"
            )

    def close(self) -> None:
        """Close the episodes' envs (also done when the rollout is collected or the interpreter exits)."""
        if self._finalizer is not None:
            self._finalizer()
        self._vector_env = self._finalizer = None


def make_rollout_func(env_id: str, **options: Any) -> EnvRollout:
    """A `rollout_func` for `GRPOTrainer(rollout_func=...)` that plays `env_id`; pair it with its
    reward function: `GRPOTrainer(reward_funcs=rollout.reward_func, rollout_func=rollout, ...)`.

    It returns `prompt_ids`, `completion_ids` (model turns and env replies, appended as tokens),
    `logprobs` (the sampling policy's logprob of each sampled token, 0.0 on env tokens), `env_mask`
    (0 on env tokens), and `env_reward` and `env_turns` per episode. Generation uses the trainer's
    vLLM engine when `use_vllm` is on, else `generate` on the model being trained.

    Args:
        env_id: a registered env id (`import gymenvs` registers gymenvs' own).
        env_kwargs: keyword arguments for `gymnasium.make`.
        tokenizer, max_completion_length: when both are given, the length is checked now (else at
            the first call); `max_completion_length` overrides the trainer's.
        max_tokens_per_turn: cap on one model turn (default: the remaining completion budget). A turn
            that reaches it is closed with the end-of-turn token and sent to the env as it is.
        show_tools: render the env's tool schemas in the prompt.
        backend, max_workers, step_timeout_s: the `ConcurrentVectorEnv` the episodes run in. An env
            that crashes or outlives `step_timeout_s` ends its own episode (reward 0, error recorded).
    """
    from wrappers.trl.agent_rollout import AgentRollout, is_agent_env

    return (AgentRollout if is_agent_env(env_id) else EnvRollout)(env_id, **options)


def evaluate(
    env_id: str,
    generator: Generator,
    tokenizer: PreTrainedTokenizerBase,
    *,
    num_episodes: int,
    seed: int = 0,
    prompt: Prompt = "",
    max_completion_length: int = 1024,
    **options: Any,
) -> list[Episode]:
    """Play `num_episodes` episodes of `env_id` (seeds `seed`, `seed + 1`, ...) with `generator` and
    return them: `episode.messages` is the transcript, `episode.reward` the env's total reward.
    `options` go to `make_rollout_func`."""
    rollout = make_rollout_func(env_id, **options)
    try:
        seeds = list(range(seed, seed + num_episodes))
        return rollout.run(
            [prompt] * num_episodes, generator, tokenizer, seeds=seeds, max_completion_length=max_completion_length
        )
    finally:
        rollout.close()


def _start(prompt: Prompt, observation: str, seed: int, info: Mapping[str, Any], renderer: ChatRenderer) -> Episode:
    messages = first_message_with(prompt, observation)
    episode = Episode(seed=seed, prompt_ids=renderer.prompt_ids(messages), messages=messages)
    if info.get("error") is not None:  # the env failed to reset: the episode ends before the model plays
        episode.fail_at_start(str(info["error"]), renderer)
    return episode


def _slot_info(infos: Mapping[str, Any], index: int) -> dict[str, Any]:
    """One slot's info from gymnasium's dict-of-arrays convention (`_key` masks which slots have `key`)."""
    info = {}
    for key, values in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is None or mask[index]:
            info[key] = _slot_info(values, index) if isinstance(values, Mapping) else values[index]
    return info


def _describe_env(env_id: str, env_kwargs: Mapping[str, Any]) -> tuple[list[dict], bool]:
    """The env's tool schemas, and whether it reads free text as an action; builds one env to check
    that the id and kwargs are valid."""
    import gymenvs
    from gymenvs.core import TextEnv

    if env_id not in gym.registry:
        raise ValueError(f"env id {env_id!r} is not registered; gymenvs envs are {gymenvs.list_envs()}")
    probe = gym.make(env_id, **env_kwargs)
    try:
        env = probe.unwrapped
        if not isinstance(env, TextEnv):
            raise ValueError(
                f"{env_id}: {type(env).__name__} is not a gymenvs TextEnv; "
                "make_rollout_func needs text observations and actions"
            )
        return env.tool_schemas(), type(env)._parse_text is not TextEnv._parse_text
    finally:
        probe.close()


def _shortest_action(tokenizer: PreTrainedTokenizerBase, tools: list[dict], accepts_free_text: bool) -> tuple[int, str]:
    """Tokens of the shortest action the env can read, end-of-turn token included."""
    candidates = [
        f'<tool_call>\n{{"name": "{tool["function"]["name"]}", "arguments": {{}}}}\n</tool_call>' for tool in tools
    ]
    if accepts_free_text:
        candidates.append("x")
    lengths = {text: len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1 for text in candidates}
    example = min(lengths, key=lengths.__getitem__)
    return lengths[example], example


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name}={value!r}: expected a positive integer or None")
    return value


def _close_quietly(vector_env: Any) -> None:
    try:
        vector_env.close()
    except Exception:  # at interpreter exit or collection time, a failing close must not raise
        pass
