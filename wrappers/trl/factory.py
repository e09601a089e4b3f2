"""`environment_factory`: any registered gymenvs env as a `GRPOTrainer(environment_factory=...)` class.

TRL builds one instance per rollout (pooled, reused across steps), calls `reset(**row)`, exposes
every public function of the class as a tool, runs the model's tool calls one rollout after
another, and reads `get_reward()`. Observations with an image reach TRL as its multimodal content
blocks, `[{"type": "image", "image": PIL.Image}, {"type": "text", "text": ...}]`. The class built here
gives each instance its own env, one method per env tool with that tool's signature and docstring,
and closes the env when the instance is collected or the interpreter exits (TRL never closes
pooled instances). With `trajectories=DIR`, each instance writes its episodes as ATIF trajectories
(`wrappers.trl.factory_trajectories`).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from pydantic import StrictBool

from gymenvs.core.images import has_image, text_view, to_pil_image
from gymenvs.core.outcomes import DETAIL_KEY, REASON_KEY, EndedBy, ended_by, ending, is_trainable
from gymenvs.core.tools import tool_docstring
from gymenvs.registry import probe
from wrappers.trl import trl_internals
from wrappers.trl.config import NonNegativeInt, OptionalFolder, OptionalPositiveInt, Options
from wrappers.trl.rollout.seeding import GroupSeeds, reset_options

if TYPE_CHECKING:
    from wrappers.trl.factory_trajectories import FactoryRecording

_RESERVED_NAMES = frozenset({"reset", "get_reward", "reward", "done", "env"})
EPISODE_OVER_NOTE = "\n(The episode is over: do not call any more tools.)"


class EpisodeOverError(RuntimeError):
    """A tool was called after the episode ended. TRL shows the message to the model as the tool result."""


class GymnasiumEnvironment:
    """Base of the classes `environment_factory` builds: one gymnasium env per instance.

    Only `reset`, `get_reward` (unless `env_reward=False`) and the env's tools are public
    functions: TRL turns every other public function of the class into a tool. `reward` and
    `done` are read-only properties, as TRL's own examples read them in reward functions.
    """

    env_id: str = ""
    env_kwargs: Mapping[str, Any] = {}
    #: The env's turn limit: a natural `GRPOConfig(max_tool_calling_iterations=...)`.
    max_turns: int | None = None
    #: Rollouts per group for seedless rows (None: read from the trainer that is generating).
    group_size: int | None = None
    #: Replays of a `reset` that raised or ended `infra`/`invalid` (TRL leaves no room to replay a played episode).
    infra_retries: int = 2
    #: The folder each instance writes its episodes into, as ATIF trajectories (None: none written).
    trajectories: Path | None = None
    _seeds: GroupSeeds

    def __init__(self) -> None:
        self._env = gym.make(self.env_id, **self.env_kwargs)
        self._finalizer = weakref.finalize(self, _close_quietly, self._env)
        self._recording = self._new_recording()
        self._episode_started = False
        self._done = False
        self._reward = 0.0
        self._outcome: str = EndedBy.MODEL
        self._infra_failures = self._retries = 0

    def _new_recording(self) -> FactoryRecording | None:
        """The recording of this instance's episodes when `trajectories` is set; it writes the episode being played
        when the instance is closed or collected, or the interpreter exits."""
        if self.trajectories is None:
            return None
        from wrappers.trl.factory_trajectories import FactoryRecording

        recording = FactoryRecording(self.trajectories, type(self).__name__)
        weakref.finalize(self, recording.close)
        return recording

    @property
    def env(self) -> gym.Env:
        """The gymnasium env this instance drives."""
        return self._env

    @property
    def reward(self) -> float:
        """The env's total reward so far in the current episode."""
        return self._reward

    @property
    def done(self) -> bool:
        """Whether the current episode has ended (terminated or truncated)."""
        return self._done

    @property
    def outcome(self) -> str:
        """Who ended the current episode (`gymenvs.core.outcomes`): `model`, `infra` or `invalid`."""
        return self._outcome

    @property
    def trainable(self) -> bool:
        """Whether the episode's reward is a verdict on the model; a reward function should return None when not."""
        return self._outcome == EndedBy.MODEL

    def reset(self, **row: Any) -> str | list[dict[str, Any]]:
        """Start an episode seeded from the dataset row and return the env's first observation
        (content blocks, image first, when the env shows images).

        A `seed` column seeds the episode; without one, the rollouts of one GRPO group share a
        start and groups differ (see `GroupSeeds`). An `options` column goes to `env.reset`.
        """
        seed = self._seeds.next(row, self.group_size or _trainer_group_size())
        self._episode_started = True
        self._done = False
        self._reward = 0.0
        self._outcome, self._infra_failures, self._retries = EndedBy.MODEL, 0, 0
        observation, info = self._reset_with_retries(seed, reset_options(row))
        if self._recording is not None:
            self._recording.start(self._env, observation, info, seed=seed, retries=self._retries, failed=self._done)
        if has_image(observation):
            return _image_blocks(observation)
        return _separator(row.get("prompt")) + _as_text(observation)

    def _reset_with_retries(self, seed: int, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        """The env's first observation from `seed` and its info, replayed up to `infra_retries` times when the reset
        raises or ends `infra`/`invalid`. When every try fails the episode is over before it starts: its reward is
        None, and the last try's info says why."""
        problem = ""
        info: dict[str, Any] = {}
        for attempt in range(self.infra_retries + 1):
            self._retries = attempt
            try:
                observation, info = self._env.reset(seed=seed, options=options)
            except Exception as exc:  # a sandbox that could not start: the infrastructure's failure
                problem, self._outcome = repr(exc), EndedBy.INFRA
                info = ending(EndedBy.INFRA, getattr(exc, "reason", "reset_error"), problem)
                self._rebuild_env()
            else:
                if is_trainable(info):
                    self._outcome = EndedBy.MODEL
                    return observation, info
                problem, self._outcome = str(info.get(DETAIL_KEY) or info.get(REASON_KEY)), ended_by(info)
            self._infra_failures += 1
        self._done = True
        return f"The episode could not start ({problem})." + EPISODE_OVER_NOTE, info

    def _rebuild_env(self) -> None:
        """A fresh env after a reset raised: the old one may be half-built, and gymnasium's env checker cannot
        take a second reset after its first one raised."""
        self._finalizer()
        self._env = gym.make(self.env_id, **self.env_kwargs)
        self._finalizer = weakref.finalize(self, _close_quietly, self._env)

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str | list[dict[str, Any]]:
        if not self._episode_started:
            raise RuntimeError(f"{self.env_id}: call reset() before calling tools")
        if self._done:
            raise EpisodeOverError(f"The episode is over; {name}() was not run. Reply without calling a tool.")
        call = {"name": name, "arguments": arguments}
        try:
            observation, reward, terminated, truncated, info = self._env.step(call)
        except Exception as error:  # TRL shows the model its message
            if self._recording is not None:
                self._recording.step_raised(call, error)
            raise
        if self._recording is not None:
            self._recording.step(call, observation, float(reward), info, terminated=terminated, truncated=truncated)
        self._reward += float(reward)
        self._done = terminated or truncated
        if self._done and not is_trainable(info):
            self._outcome = ended_by(info)
            self._infra_failures += 1
        note = EPISODE_OVER_NOTE if self._done else ""
        if has_image(observation):
            return _image_blocks(observation, note)
        return _as_text(observation) + note

    def _close(self) -> None:
        """Close the env, after writing the episode being played if `trajectories` is set."""
        if self._recording is not None:
            self._recording.close()
        self._finalizer()


class EnvReward:
    """Mixed in when the env's own reward is a TRL reward source (`env_reward=True`)."""

    def get_reward(self) -> float | None:
        """The env's total reward for the current episode; None (TRL: NaN, left out of the group's advantage) when
        infrastructure or a broken task ended it. Logs `infra_failures`, `retries` and `dropped` for the episode."""
        episode: GymnasiumEnvironment = self  # type: ignore[assignment]
        trainer = trl_internals.generating_trainer()
        dropped = not episode.trainable
        for name, value in (("infra_failures", episode._infra_failures), ("retries", episode._retries), ("dropped", dropped)):
            trl_internals.log_metric(trainer, name, float(value))
        return None if dropped else episode._reward


class FactoryOptions(Options):
    """`environment_factory`'s own options, checked when it is called."""

    env_reward: StrictBool = True
    group_size: OptionalPositiveInt = None
    infra_retries: NonNegativeInt = 2
    trajectories: OptionalFolder = None


def environment_factory(
    env_id: str,
    *,
    name: str | None = None,
    env_reward: bool = True,
    group_size: int | None = None,
    infra_retries: int = 2,
    trajectories: str | Path | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> type[GymnasiumEnvironment]:
    """A class for `GRPOTrainer(environment_factory=...)` that plays `env_id` built with the env kwargs.

    The env id must be registered (`import gymenvs` registers gymenvs' own), the kwargs must be
    valid for it, and every tool must be describable to a model by `transformers.utils.get_json_schema`:
    each is checked here, so a bad configuration fails now rather than at the first training step.
    Every call returns a new class, so several can go in a dict (`environment_factory={"a": ..., "b": ...}`).

    Args:
        env_id: a registered env id.
        name: the class name, which TRL uses as the env reward's column in its logs (default: the
            env id's name, plus the kwargs when there are any, e.g. `Catch_v0_rows_2`).
        env_reward: define `get_reward`, which TRL adds as a reward function of weight 1 beside
            `reward_funcs`. Pass False when your own reward functions already score the episode
            (they can read `environments[i].reward` and `.done`), so nothing is counted twice.
        group_size: rollouts per prompt (`num_generations`) for rows without a `seed` column;
            default: read from the trainer that is generating.
        infra_retries: replays of a `reset` that raised or ended `infra`/`invalid`, from the same seed. An
            episode that infrastructure or its task ended (at reset after every replay, or mid-episode, where
            TRL's tool loop leaves no way to replay it) gets `get_reward()` None: TRL makes it NaN and leaves it
            out of its group's advantage. Your own reward functions should return None when
            `environments[i].trainable` is False, or TRL still scores the episode with their values.
        trajectories: a folder each instance writes its episodes into, as ATIF trajectories
            (`DIR/rank-0/Wordle-v0-seed3.json`; `wrappers.trl.factory_trajectories`): the conversation as the
            env saw it (its observations, the tool calls and their rewards), without the model's tokens, which
            TRL never shows the env.
        env_kwargs, **kwargs: keyword arguments for `gymnasium.make` (both forms merge), as
            `gymnasium.make` takes them; a keyword the env does not take fails here, at the probe.
            (`make_rollout_func`, with many options of its own, takes them in `env_kwargs` only.)
    """
    from transformers.utils import get_json_schema

    env_kwargs = {**(env_kwargs or {}), **kwargs}
    class_name = _class_name(env_id, env_kwargs) if name is None else _checked_name(name)
    FactoryOptions(env_reward=env_reward, group_size=group_size, infra_retries=infra_retries, trajectories=trajectories)
    env_class, max_turns = _probe(env_id, env_kwargs)
    namespace: dict[str, Any] = {
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs),
        "max_turns": max_turns,
        "group_size": group_size,
        "infra_retries": infra_retries,
        "trajectories": None if trajectories is None else Path(trajectories),
        "_seeds": GroupSeeds(class_name),
        "__module__": __name__,
    }
    for tool_name in env_class.tools:
        if tool_name in _RESERVED_NAMES or tool_name.startswith("_"):
            raise ValueError(
                f"{env_id}: a tool cannot be named {tool_name!r} (reserved: {sorted(_RESERVED_NAMES)} and private names)"
            )
        spec = env_class.tools[tool_name]
        method = _tool_method(tool_name, getattr(env_class, tool_name), tool_docstring(spec.schema))
        try:
            trl_schema = get_json_schema(method)
        except Exception as exc:  # transformers raises its own parsing exceptions; all mean the same here
            raise ValueError(f"{env_id}: tool {tool_name!r} cannot be described to a model: {exc}") from exc
        if trl_schema != spec.schema:  # TRL would show the model another schema than the env's info["tools"]
            raise ValueError(f"{env_id}: tool {tool_name!r} cannot be described to a model: TRL would read "
                             f"{trl_schema} from it, the env declares {spec.schema}")
        namespace[tool_name] = method
    bases = (GymnasiumEnvironment, EnvReward) if env_reward else (GymnasiumEnvironment,)
    return type(class_name, bases, namespace)


def _class_name(env_id: str, env_kwargs: Mapping[str, Any]) -> str:
    """`Catch_v0`, or `Catch_v0_rows_2` with kwargs: two configurations of one env get two names."""
    parts = [env_id.rsplit("/", 1)[-1], *(f"{key}_{value}" for key, value in sorted(env_kwargs.items()))]
    return re.sub(r"\W|^(?=\d)", "_", "_".join(parts))[:80]


def _checked_name(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name={name!r}: expected a Python identifier (it names the class and its reward column)")
    return name


def _trainer_group_size() -> int | None:
    trainer = trl_internals.generating_trainer()
    return None if trainer is None else trl_internals.group_size(trainer)


def _probe(env_id: str, env_kwargs: Mapping[str, Any]) -> tuple[Any, int | None]:
    """The env's class and turn limit, from one env built to check that the id and kwargs are valid."""
    probed = probe(env_id, env_kwargs)
    if not getattr(probed.env_class, "tools", None):
        raise ValueError(
            f"{env_id}: {probed.env_class.__name__} declares no tools; "
            "environment_factory needs a gymenvs TextEnv with @tool methods"
        )
    return probed.env_class, probed.max_turns


def _tool_method(name: str, function: Callable, docstring: str) -> Callable:
    """A method that forwards to the env's tool `name`, with the tool's parameters and a docstring from
    which `get_json_schema` reads the env's own schema (`gymenvs.core.tools.tool_docstring`)."""
    hints = typing.get_type_hints(function)
    signature = inspect.signature(function)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
    parameter_names = [p.name for p in parameters[1:]]  # after self

    def method(self: GymnasiumEnvironment, *args: Any, **kwargs: Any) -> str | list[dict[str, Any]]:
        if len(args) > len(parameter_names):
            raise TypeError(f"{name}() takes {len(parameter_names)} arguments, got {len(args)}")
        return self._call_tool(name, {**dict(zip(parameter_names, args)), **kwargs})

    method.__name__ = method.__qualname__ = name
    method.__doc__ = docstring
    # No return annotation: get_json_schema would add it to the schema the model reads.
    method.__signature__ = signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
    method.__annotations__ = {k: v for k, v in hints.items() if k != "return"}
    return method


def _separator(prompt: Any) -> str:
    """TRL appends `reset`'s return to the last prompt message with no separator: add one if needed."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        content = prompt[-1].get("content")
        if isinstance(content, str) and content and not content[-1].isspace():
            return "\n\n"
    return ""


def _as_text(observation: Any) -> str:
    return observation if isinstance(observation, str) else json.dumps(observation, default=str)


def _image_blocks(observation: Mapping[str, Any], note: str = "") -> list[dict[str, Any]]:
    """A text+image observation as TRL 1.16's multimodal content blocks: the image (a PIL image), then the text."""
    image = to_pil_image(observation["image"])
    return [{"type": "image", "image": image}, {"type": "text", "text": text_view(observation) + note}]


def _close_quietly(env: gym.Env) -> None:
    try:
        env.close()
    except Exception:  # at interpreter exit or collection time, a failing close must not raise
        pass
