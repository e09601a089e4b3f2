"""`EnvRollout`: the episode loop every rollout shares; episodes of a whole batch run concurrently,
with token-level logprobs, for GRPO. `make_rollout_func` (rollout/env.py) builds one for an env.

TRL's own `environment_factory` loop runs env tools one rollout after another. Here every episode
of the batch lives in one slot of a `ConcurrentVectorEnv`; each turn, the model generates for all
episodes still running in one batch, and the env steps them all at once. The same loop evaluates
a model without a trainer (`EnvRollout.run`, `evaluate_rollouts`).
"""

from __future__ import annotations

import functools
import json
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from pydantic import StrictBool

from gymenvs.core.actions import render_tool_call
from gymenvs.core.images import has_image, text_view
from gymenvs.core.outcomes import DETAIL_KEY, REASON_KEY, is_trainable
from gymenvs.env_ids import find_spec
from wrappers.trl import trl_internals
from wrappers.trl.config import NonNegativeInt, OptionalPositiveInt, Options
from wrappers.trl.rollout.seeding import GroupSeeds, reset_options
from wrappers.trl.rollout.transcript import ChatRenderer, Episode, first_message_with
from wrappers.vector import ConcurrentVectorEnv
from wrappers.vector.config import make_config

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from wrappers.trl.generation.base import Generator
    from wrappers.trl.rollout.trajectories import EnvOfEpisodes, TrajectoryWriter

Prompt = list[dict[str, Any]] | str
logger = logging.getLogger(__name__)


def env_reward(
    completions: Sequence[Any] | None = None, env_reward: Sequence[float | None] | None = None, **kwargs: Any
) -> list[float | None]:
    """Reward function for `GRPOTrainer(reward_funcs=...)`: each episode's total env reward, as the
    rollout function returned it in its `env_reward` field. An episode that infrastructure or a broken
    task ended, even after its retries, has None there and gets None: TRL leaves it out of its group."""
    if env_reward is None:
        raise ValueError("no env_reward field: env_reward scores episodes from make_rollout_func's rollout_func")
    return [None if value is None else float(value) for value in env_reward]


EnvSpec = str | tuple[str, Mapping[str, Any]]
ENVIRONMENT_COLUMN = "environment"


class RolloutOptions(Options):
    """How a rollout plays its episodes (see `make_rollout_func` for each option); the env and the
    vector env are checked by their own code."""

    max_completion_length: OptionalPositiveInt = None
    max_tokens_per_turn: OptionalPositiveInt = None
    show_tools: StrictBool = True
    chat_template_kwargs: dict[str, Any] = {}
    group_size: OptionalPositiveInt = None
    infra_retries: NonNegativeInt = 2


#: The counts a rollout logs to the trainer (TRL's `log_metric`) after each batch.
OUTCOME_METRICS = ("infra_failures", "retries", "dropped")


def _vector_options(
    backend: str, max_workers: int | None, step_timeout_s: float | None, vector_kwargs: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The `ConcurrentVectorEnv` settings of a rollout, checked now rather than at its first call."""
    options: dict[str, Any] = {"backend": backend, "max_workers": max_workers, "step_timeout_s": step_timeout_s}
    repeated = sorted(set(vector_kwargs or {}) & set(options))
    if repeated:
        raise ValueError(f"vector_kwargs={vector_kwargs!r}: give {', '.join(repeated)} as keyword(s) of their own")
    options.update(vector_kwargs or {})
    make_config(**options)  # a bad or unknown setting is a ValueError
    return options


@dataclass
class RolloutEnv:
    """One env a rollout plays: its id and kwargs, its tools, and where its episodes' seeds come from."""

    name: str
    env_id: str
    env_kwargs: dict[str, Any]
    tools: list[dict]
    accepts_free_text: bool
    seeds: GroupSeeds


class EnvRollout:
    """A `rollout_func` for `GRPOTrainer`, and a trainer-free episode runner; built by `make_rollout_func`,
    whose docstring describes the options."""

    reward_func = staticmethod(env_reward)

    def __init__(
        self,
        env_id: str | Mapping[str, EnvSpec] | Sequence[str],
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        max_completion_length: int | None = None,
        max_tokens_per_turn: int | None = None,
        show_tools: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        group_size: int | None = None,
        infra_retries: int = 2,
        backend: str = "thread",
        max_workers: int | None = None,
        step_timeout_s: float | None = None,
        vector_kwargs: Mapping[str, Any] | None = None,
        trajectories: str | Path | None = None,
    ):
        self.options = RolloutOptions(
            max_completion_length=max_completion_length,
            max_tokens_per_turn=max_tokens_per_turn,
            show_tools=show_tools,
            chat_template_kwargs=dict(chat_template_kwargs or {}),
            group_size=group_size,
            infra_retries=infra_retries,
        )
        #: Totals over every batch played so far; each batch's own go to the trainer's logs.
        self.outcome_counts = dict.fromkeys(OUTCOME_METRICS, 0)
        self._set_envs(env_id, env_kwargs)
        self.tokenizer = tokenizer
        self.max_completion_length = self.options.max_completion_length
        self.max_tokens_per_turn = self.options.max_tokens_per_turn
        self.group_size = self.options.group_size
        self.chat_template_kwargs = dict(self.options.chat_template_kwargs)
        self.vector_options = _vector_options(backend, max_workers, step_timeout_s, vector_kwargs)
        self.show_tools = self.options.show_tools
        self.trajectories = None if trajectories is None else Path(trajectories)
        self._writer: TrajectoryWriter | None = None
        self._vector_envs: dict[str, ConcurrentVectorEnv] = {}
        self._finalizer = weakref.finalize(self, _close_all_quietly, self._vector_envs)
        self._trainer_generator: tuple[Any, Generator] | None = None
        self._told_about_images = False
        if tokenizer is not None and max_completion_length is not None:
            self._check_budget(tokenizer, max_completion_length)

    def _set_envs(self, env_id: str | Mapping[str, EnvSpec] | Sequence[str], env_kwargs: Mapping[str, Any] | None) -> None:
        """The envs this rollout plays; the first one's id, kwargs and tools stand for the single env's."""
        self.envs = _rollout_envs(env_id, dict(env_kwargs or {}))
        self.multi_env = not isinstance(env_id, str)
        first = next(iter(self.envs.values()))
        self.env_id, self.env_kwargs = first.env_id, first.env_kwargs
        self.tools, self.accepts_free_text = first.tools, first.accepts_free_text

    # -- the TRL rollout_func -----------------------------------------------------------

    def __call__(self, prompts: list[Prompt], trainer: Any) -> dict[str, list]:
        """Run one episode per prompt (TRL passes each prompt `num_generations` times in a row).

        The dataset rows behind the prompts (their `seed`, `options` and `environment` columns)
        are read from the trainer's generation step.
        """
        processing_class = trainer.processing_class
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        rows = trl_internals.batch_rows(trainer)
        if rows is None or len(rows) != len(prompts):
            rows = [{"prompt": prompt} for prompt in prompts]
        rows = [{**row, "prompt": prompt} for row, prompt in zip(rows, prompts)]
        chat_template_kwargs = {**(trainer.args.chat_template_kwargs or {}), **self.chat_template_kwargs}
        episodes = self.run(
            prompts,
            self._generator_for(trainer),
            tokenizer,
            rows=rows,
            group_size=self.group_size or trl_internals.group_size(trainer),
            max_completion_length=self.max_completion_length or trainer.args.max_completion_length,
            chat_template_kwargs=chat_template_kwargs,
        )
        output: dict[str, list] = {
            "prompt_ids": [episode.prompt_ids for episode in episodes],
            "completion_ids": [episode.completion_ids for episode in episodes],
            "logprobs": [episode.logprobs for episode in episodes],
            "env_mask": [episode.env_mask for episode in episodes],
            "env_reward": [episode.reward if episode.trainable else None for episode in episodes],
            "env_turns": [episode.turns for episode in episodes],
            "env_seed": [episode.seed for episode in episodes],
            "env_outcome": [str(episode.outcome) for episode in episodes],
            "env_retries": [episode.retries for episode in episodes],
        }
        if self.multi_env:
            output["env_name"] = [episode.env_name for episode in episodes]
        for name, count in outcome_counts(episodes).items():
            trl_internals.log_metric(trainer, name, float(count))
        return output

    def _generator_for(self, trainer: Any) -> Generator:
        from wrappers.trl.generation.trainer import generator_from_trainer

        if self._trainer_generator is None or self._trainer_generator[0] is not trainer:
            self._trainer_generator = (trainer, generator_from_trainer(trainer))
        return self._trainer_generator[1]

    def reward_func_for(self, name: str) -> Callable[..., list[float | None]]:
        """A reward function, named `<name>_reward`, that scores the episodes of env `name` with their
        env reward and returns None (ignored by TRL) for the other envs' episodes."""
        if name not in self.envs:
            raise ValueError(f"no env named {name!r}; this rollout plays {list(self.envs)}")

        def reward(env_reward: Sequence[float | None], env_name: Sequence[str] | None = None, **kwargs: Any) -> list:
            names = env_name if env_name is not None else [next(iter(self.envs))] * len(env_reward)
            return [float(value) if each == name and value is not None else None for value, each in zip(env_reward, names)]

        reward.__name__ = reward.__qualname__ = f"{name}_reward"
        return reward

    # -- episodes without a trainer -----------------------------------------------------

    def run(
        self,
        prompts: Sequence[Prompt],
        generator: Generator,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        seeds: Sequence[int] | None = None,
        rows: Sequence[Mapping[str, Any]] | None = None,
        group_size: int | None = None,
        max_completion_length: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> list[Episode]:
        """Play one episode per prompt, all at once, and return them (tokens, messages, rewards).

        Each episode's seed is `seeds[i]`, else its row's `seed` column; rows without one (or no
        rows: each prompt is a row) are seeded as `GroupSeeds` describes, with `group_size`
        consecutive rollouts per group. A row's `options` column goes to the env's reset, and with
        several envs its `environment` column picks the env. The env's first observation is
        appended to the prompt's last message.
        """
        tokenizer = tokenizer or self.tokenizer
        max_completion_length = max_completion_length or self.max_completion_length
        if tokenizer is None or max_completion_length is None:
            raise ValueError("run() needs a tokenizer and a max_completion_length (here or in the constructor)")
        self._check_budget(tokenizer, max_completion_length)
        starts = self._episode_starts(prompts, seeds, rows, group_size or self.group_size)
        renderers = self._renderers(tokenizer, {**self.chat_template_kwargs, **(chat_template_kwargs or {})})
        episodes = self._play(starts, generator, renderers, max_completion_length)
        if self.trajectories is not None:
            if self._writer is None:
                from wrappers.trl.rollout.trajectories import TrajectoryWriter

                self._writer = TrajectoryWriter(self.trajectories, self.trajectory_envs())
            self._writer.submit(episodes, getattr(tokenizer, "name_or_path", None) or None)
        return episodes

    def trajectory_envs(self) -> dict[str, EnvOfEpisodes]:
        """What the trajectory of an episode says of its env, for each env this rollout plays (by name): its id, and
        the tool schemas the model was shown."""
        from wrappers.trl.rollout.trajectories import EnvOfEpisodes

        return {name: EnvOfEpisodes(env.env_id, env.tools if self.show_tools else None) for name, env in self.envs.items()}

    def _episode_starts(
        self,
        prompts: Sequence[Prompt],
        seeds: Sequence[int] | None,
        rows: Sequence[Mapping[str, Any]] | None,
        group_size: int | None,
    ) -> list[EpisodeStart]:
        """Each prompt's env, seed and reset options, from its row (see `run`)."""
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        if rows is not None and len(rows) != len(prompts):
            raise ValueError(f"{len(rows)} rows for {len(prompts)} prompts")
        rows = list(rows) if rows is not None else [{"prompt": prompt} for prompt in prompts]
        names = [self._env_name_of(row) for row in rows]
        if seeds is None:
            seeds = [self.envs[name].seeds.next(row, group_size) for name, row in zip(names, rows)]
        return [
            EpisodeStart(prompt, name, seed, reset_options(row)) for prompt, name, seed, row in zip(prompts, names, seeds, rows)
        ]

    def _renderers(self, tokenizer: PreTrainedTokenizerBase, template_kwargs: dict[str, Any]) -> dict[str, ChatRenderer]:
        """One chat renderer per env, with its tools when `show_tools` is on."""
        return {
            name: ChatRenderer(tokenizer, env.tools if self.show_tools else None, template_kwargs)
            for name, env in self.envs.items()
        }

    def _env_name_of(self, row: Mapping[str, Any]) -> str:
        if not self.multi_env:
            return next(iter(self.envs))
        name = row.get(ENVIRONMENT_COLUMN)
        if name not in self.envs:
            raise ValueError(
                f"dataset row has {ENVIRONMENT_COLUMN}={name!r}; this rollout plays {list(self.envs)} "
                f"(add an {ENVIRONMENT_COLUMN!r} column naming one per row)"
            )
        return name

    def _play(
        self,
        starts: list[EpisodeStart],
        generator: Generator,
        renderers: Mapping[str, ChatRenderer],
        max_length: int,
    ) -> list[Episode]:
        """Play every start; replay from the same start (seed, options) each episode that infrastructure or a
        broken task ended, up to `infra_retries` times, so groups stay full. What still fails stays untrainable."""
        episodes = self._play_once(starts, generator, renderers, max_length)
        _count_failures(episodes)
        for _ in range(self.options.infra_retries):
            failed = [index for index, episode in enumerate(episodes) if not episode.trainable]
            if not failed:
                break
            logger.warning("replaying %d episode(s) that infrastructure or their task ended: %s", len(failed),
                           "; ".join(_why_ended(episodes[index]) for index in failed))
            replayed = self._play_once([starts[index] for index in failed], generator, renderers, max_length)
            _count_failures(replayed)
            for index, episode in zip(failed, replayed):
                episode.infra_failures += episodes[index].infra_failures
                episode.retries = episodes[index].retries + 1
                episodes[index] = episode
        for name, count in outcome_counts(episodes).items():
            self.outcome_counts[name] += count
        return episodes

    def _play_once(
        self,
        starts: list[EpisodeStart],
        generator: Generator,
        renderers: Mapping[str, ChatRenderer],
        max_length: int,
    ) -> list[Episode]:
        slots = _slots_by_env(starts)  # env name -> indices of its episodes, in slot order
        episodes: list[Episode] = [None] * len(starts)  # type: ignore[list-item]
        for name, indices in slots.items():
            vector_env = self._vector_env_for(name, len(indices))
            for slot, (observation, info) in enumerate(_reset(vector_env, [starts[i] for i in indices])):
                start = starts[indices[slot]]
                (observation,) = self._text_views([observation])
                episode = self._start_episode(start.prompt, observation, start.seed, info, renderers[name])
                episode.env_name = name
                episodes[indices[slot]] = episode
        while live := [index for index, episode in enumerate(episodes) if not episode.finished]:
            budgets = [self._turn_budget(episodes[index], max_length) for index in live]
            completions = generator.generate([episodes[index].input_ids for index in live], budgets)
            actions: dict[int, Any] = {}
            for index, completion in zip(live, completions):
                renderer = renderers[starts[index].env_name]
                actions[index] = episodes[index].add_model_turn(completion, renderer, max_length)
            for name, indices in slots.items():
                self._step(name, indices, actions, episodes, renderers[name], max_length)
        return episodes

    def _step(
        self,
        name: str,
        indices: list[int],
        actions: Mapping[int, Any],
        episodes: list[Episode],
        renderer: ChatRenderer,
        max_length: int,
    ) -> None:
        """Step env `name`'s slots whose episode produced an action this turn."""
        vector_env = self._vector_envs[name]
        slot_actions: list[str | None] = [None] * vector_env.num_envs
        for slot, index in enumerate(indices):
            slot_actions[slot] = actions.get(index)
        if all(action is None for action in slot_actions):
            return
        raw_observations, rewards, terminated, truncated, infos = vector_env.step(slot_actions)
        observations = self._text_views(raw_observations)
        for slot, index in enumerate(indices):
            if slot_actions[slot] is not None:
                episodes[index].add_env_turn(
                    observations[slot],
                    rewards[slot],
                    terminated[slot],
                    truncated[slot],
                    _slot_info(infos, slot),
                    renderer,
                    max_length,
                )

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

    def _vector_env_for(self, name: str, num_envs: int) -> ConcurrentVectorEnv:
        """Env `name`'s vector env, with at least `num_envs` slots (it grows, never shrinks: a
        multi-env batch's mix changes from step to step)."""
        vector_env = self._vector_envs.get(name)
        if vector_env is not None and vector_env.num_envs < num_envs:
            _close_quietly(self._vector_envs.pop(name))
            vector_env = None
        if vector_env is None:
            env = self.envs[name]
            make = functools.partial(gym.make, find_spec(env.env_id), **env.env_kwargs)
            vector_env = ConcurrentVectorEnv(
                [make] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED, **self.vector_options
            )
            self._vector_envs[name] = vector_env
        return vector_env

    # -- checks -------------------------------------------------------------------------

    def _check_budget(self, tokenizer: PreTrainedTokenizerBase, max_completion_length: int) -> None:
        """A clear error when `max_completion_length` cannot hold even the shortest action plus its
        end-of-turn token: every episode would end before the env sees an action."""
        for env in self.envs.values():
            shortest, example = _shortest_action(tokenizer, env.tools, env.accepts_free_text)
            if max_completion_length < shortest:
                raise ValueError(
                    f"max_completion_length={max_completion_length} is too small for one turn of {env.env_id}: "
                    f"its shortest action ({example!r} plus the end-of-turn token) takes {shortest} tokens"
                )

    def close(self) -> None:
        """Close the episodes' envs (also done when the rollout is collected or the interpreter exits), after the
        trajectories being written, if any, are."""
        if self._writer is not None:
            self._writer.close()
        _close_all_quietly(self._vector_envs)


def _why_ended(episode: Episode) -> str:
    """Who ended `episode` and why, as its last `info` says (the detail shortened)."""
    detail = str(episode.final_info.get(DETAIL_KEY) or "")
    return f"{episode.outcome} ({episode.outcome_reason})" + (f": {detail[:300]}" if detail else "")


def _count_failures(episodes: Sequence[Episode]) -> None:
    for episode in episodes:
        if not episode.trainable:
            episode.infra_failures += 1


def outcome_counts(episodes: Sequence[Episode]) -> dict[str, int]:
    """`infra_failures` (attempts that infrastructure or the task ended), `retries` (attempts replayed) and
    `dropped` (episodes that still failed: left out of training) over `episodes`."""
    return {
        "infra_failures": sum(episode.infra_failures for episode in episodes),
        "retries": sum(episode.retries for episode in episodes),
        "dropped": sum(not episode.trainable for episode in episodes),
    }


@dataclass(frozen=True)
class EpisodeStart:
    """What one episode starts from: its prompt, env, seed and reset options."""

    prompt: Prompt
    env_name: str
    seed: int
    options: dict[str, Any] | None


def _rollout_envs(spec: Any, env_kwargs: dict[str, Any]) -> dict[str, RolloutEnv]:
    """`{name: RolloutEnv}` from one env id, `{name: env_id or (env_id, kwargs)}`, or a list of ids.
    `env_kwargs` apply to a single env id only."""
    named: dict[str, tuple[str, Mapping[str, Any]]]
    if isinstance(spec, str):
        named = {spec: (spec, env_kwargs)}
    elif env_kwargs:
        raise ValueError("env_kwargs with several envs: give each its own as {name: (env_id, kwargs)}")
    elif isinstance(spec, Mapping):
        named = {name: _id_and_kwargs(name, value) for name, value in spec.items()}
    elif isinstance(spec, Sequence) and all(isinstance(value, str) for value in spec):
        named = {value: (value, {}) for value in spec}
    else:
        raise ValueError(f"env_id={spec!r}: expected an env id, a list of env ids, or {{name: env_id or (env_id, kwargs)}}")
    if not named:
        raise ValueError("env_id: expected at least one env")
    envs = {}
    for name, (env_id, kwargs) in named.items():
        tools, accepts_free_text = _describe_env(env_id, kwargs)
        envs[name] = RolloutEnv(name, env_id, dict(kwargs), tools, accepts_free_text, GroupSeeds(str(name)))
    return envs


def _id_and_kwargs(name: Any, value: Any) -> tuple[str, Mapping[str, Any]]:
    if isinstance(value, str):
        return value, {}
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], Mapping):
        return value
    raise ValueError(f"env {name!r}: expected an env id or (env_id, kwargs), got {value!r}")


def _slots_by_env(starts: Sequence[EpisodeStart]) -> dict[str, list[int]]:
    slots: dict[str, list[int]] = {}
    for index, start in enumerate(starts):
        slots.setdefault(start.env_name, []).append(index)
    return slots


def _reset(vector_env: ConcurrentVectorEnv, starts: Sequence[EpisodeStart]) -> list[tuple[str, dict[str, Any]]]:
    """Reset the first `len(starts)` slots with their seeds; one reset call per distinct `options`."""
    results: list[tuple[str, dict[str, Any]]] = [None] * len(starts)  # type: ignore[list-item]
    by_options: dict[str, list[int]] = {}
    for slot, start in enumerate(starts):
        by_options.setdefault(json.dumps(start.options, sort_keys=True, default=str), []).append(slot)
    for slots in by_options.values():
        mask = np.zeros(vector_env.num_envs, dtype=bool)
        mask[slots] = True
        seeds: list[int | None] = [None] * vector_env.num_envs
        for slot in slots:
            seeds[slot] = starts[slot].seed
        options = {**(starts[slots[0]].options or {}), "reset_mask": mask}
        observations, infos = vector_env.reset(seed=seeds, options=options)
        for slot in slots:
            results[slot] = (observations[slot], _slot_info(infos, slot))
    return results


def _start(
    prompt: Prompt,
    observation: str,
    seed: int,
    info: Mapping[str, Any],
    renderer: ChatRenderer,
    env_name: str | None = None,
) -> Episode:
    messages = first_message_with(prompt, observation)
    episode = Episode(seed=seed, prompt_ids=renderer.prompt_ids(messages), messages=messages, env_name=env_name)
    if info.get("error") is not None or not is_trainable(dict(info)):  # the env failed to reset, or refused the task
        episode.fail_at_start(str(info.get("error") or info.get(DETAIL_KEY) or info.get(REASON_KEY)), renderer, info)
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
    from gymenvs.core import TextEnv
    from gymenvs.registry import probe

    probed = probe(env_id, env_kwargs)
    if not issubclass(probed.env_class, TextEnv):
        raise ValueError(
            f"{env_id}: {probed.env_class.__name__} is not a gymenvs TextEnv; "
            "make_rollout_func needs text observations and actions"
        )
    return probed.tools, probed.env_class.reads_free_text()


def _shortest_action(tokenizer: PreTrainedTokenizerBase, tools: list[dict], accepts_free_text: bool) -> tuple[int, str]:
    """Tokens of the shortest action the env can read, end-of-turn token included."""
    candidates = [render_tool_call(tool["function"]["name"], {}) for tool in tools]
    if accepts_free_text:
        candidates.append("x")
    lengths = {text: len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1 for text in candidates}
    example = min(lengths, key=lengths.__getitem__)
    return lengths[example], example


def _close_all_quietly(vector_envs: dict[str, Any]) -> None:
    while vector_envs:
        _close_quietly(vector_envs.popitem()[1])


def _close_quietly(vector_env: Any) -> None:
    try:
        vector_env.close()
    except Exception:  # at interpreter exit or collection time, a failing close must not raise
        pass
