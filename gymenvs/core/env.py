"""`TextEnv`: the base class of every gymenvs environment."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import pydantic
from gymnasium.error import ResetNeeded
from pydantic import PositiveInt

from gymenvs.core.actions import ActionError, ToolCall, parse_action
from gymenvs.core.config import validate_config
from gymenvs.core.errors import EnvClosedError, ResetOptionsError, ToolResultError, did_you_mean, listing, short_repr
from gymenvs.core.outcomes import OUTCOME_KEY, EndedBy, ending
from gymenvs.core.spaces import UnicodeText, fitted_text
from gymenvs.core.tools import ToolSpec, tool_schemas, tool_spec


@dataclass(slots=True)  # no per-instance __dict__ to build: one is made on every step
class Outcome:
    """What a tool call did: the observation the agent reads, and what it means for the episode."""

    observation: str
    reward: float = 0.0
    terminated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    #: The episode must stop for a reason outside the task (a sandbox died); make it with `Outcome.infra`,
    #: which says why (a truncated outcome without `info["outcome"]` counts as infra, reason "truncated").
    truncated: bool = False

    @classmethod
    def infra(cls, observation: str, reason: str, detail: str, info: dict[str, Any] | None = None) -> Outcome:
        """An outcome that stops the episode for a failure of the infrastructure (`reason`, e.g. "container_died"):
        its reward is no verdict on the agent (`gymenvs.core.outcomes`)."""
        return cls(observation, truncated=True, info={**(info or {}), "error": detail, **ending(EndedBy.INFRA, reason, detail)})


class TextEnv(gym.Env[str, str]):
    """A `gymnasium.Env` whose observations and actions are text.

    Subclasses declare actions as `@tool` methods returning a `str` or an `Outcome`, and implement
    `_start_episode` (the first observation, drawing any randomness from `self.np_random`). They
    may override `_parse_text` (how free text maps to a tool call), `_at_turn_limit`, `_episode_state`
    and `_render_ansi`; an env whose actions are not tool calls (an agent's reply) overrides `_act`.
    Invalid actions raise `ActionError` inside a tool; the agent then reads the message as its
    observation and `info["error"]` holds it. Exceptions escape only on API misuse.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # a class attribute, as in gymnasium.Env
    #: Turns allowed per episode when the constructor is not given `max_turns`.
    default_max_turns: ClassVar[int] = 32
    #: Observations longer than this are cut in the middle.
    max_observation_length: ClassVar[int] = 16_384
    #: Keys `reset(options=...)` accepts; any other key is a `ValueError` (an instance may set its own).
    reset_option_keys: frozenset[str] = frozenset()
    tools: ClassVar[dict[str, ToolSpec]] = {}
    #: True when the env must be driven from the thread that built it (a browser, a GUI toolkit):
    #: `gymnasium.make_vec` on the thread backend then gives each slot a dedicated thread.
    thread_affine: ClassVar[bool] = False
    #: True when the env hosts an agent program whose LLM calls are its observations: each
    #: observation is a chat request and each action the reply. Such an env puts an `AgentRequest`
    #: (`gymenvs.container.agent.request`: the messages, tools, which messages are new, whether the
    #: agent rewrote its history) in `info["request"]` at `reset` and at every step that does not end
    #: the episode. `wrappers.trl.make_rollout_func` reads it off the registered class (no env is
    #: built for that) and plays such an env with an `AgentRollout`, which tracks token sequences
    #: per request instead of per turn.
    hosts_agent: ClassVar[bool] = False
    #: Whether the observation is the text itself (`_observation` not overridden): `step` then skips that call.
    _observes_text: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._observes_text = cls._observation is TextEnv._observation
        tools = {spec.name: spec for spec in map(tool_spec, vars(cls).values()) if spec is not None}
        for base in cls.__mro__[1:]:
            for name, spec in getattr(base, "tools", {}).items():
                tools.setdefault(name, spec)
        cls.tools = dict(sorted(tools.items()))  # name order, as `tool_schemas` and TRL list them

    @validate_config
    def __init__(self, *, max_turns: PositiveInt | None = None, render_mode: str | None = None):
        self.max_turns = self.default_max_turns if max_turns is None else max_turns
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode={render_mode!r}: allowed are {self.metadata['render_modes']} or None")
        self.render_mode = render_mode
        self.observation_space = UnicodeText(self.max_observation_length)
        self.action_space = UnicodeText(self.max_observation_length)
        self._tool_schemas = tool_schemas(self.tools)
        self._episode_id: str | None = None
        self._step_count = 0
        self._done = False
        self._last_observation = ""
        self._closed = False

    # -- the gymnasium API ---------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._check_open("reset")
        options = checked_reset_options(self._name(), options, self.reset_option_keys)
        super().reset(seed=seed)
        self._episode_id = uuid.uuid4().hex
        self._step_count = 0
        self._done = False
        info = {"tools": self.tool_schemas()}
        try:
            self._last_observation = fitted_text(self._start_episode(options), self.max_observation_length)
            observation = self._observation(self._last_observation, info)
        except BaseException:
            self._episode_id = None  # a failed reset leaves no episode to step
            raise
        return observation, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._closed or self._done or self._episode_id is None:  # one test on the hot path
            self._refuse_step()
        self._step_count += 1
        try:
            outcome = self._act(action)
        except ActionError as error:
            outcome = Outcome(f"Invalid action: {error}", info={"error": str(error)})
        truncated = not outcome.terminated and (outcome.truncated or self._step_count >= self.max_turns)
        if truncated and not outcome.truncated:
            outcome.observation += f"\nTurn limit reached ({self.max_turns} turns)."
            outcome.info["truncated_reason"] = "turn_limit"
            outcome = self._at_turn_limit(outcome)
        self._done = outcome.terminated or truncated
        if self._done and OUTCOME_KEY not in outcome.info:
            outcome.info.update(self._default_ending(outcome, truncated))
        text = outcome.observation
        if not (text.isascii() and len(text) <= self.max_observation_length):  # fitted_text's own test, spared a call
            text = fitted_text(text, self.max_observation_length)
        self._last_observation = text
        observation = text if self._observes_text else self._observation(text, outcome.info)
        return observation, float(outcome.reward), bool(outcome.terminated), truncated, outcome.info

    def close(self) -> None:
        """Release what the env holds; later `reset` and `step` raise `EnvClosedError`. A subclass that
        overrides it calls `super().close()`."""
        self._closed = True
        super().close()

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._render_ansi()
        return None

    def state(self) -> dict[str, Any]:
        """A JSON-serializable snapshot of the episode."""
        return {
            "env": self._name(),
            "episode_id": self._episode_id,
            "step_count": self._step_count,
            "max_turns": self.max_turns,
            "done": self._done,
            **(self._episode_state() if self._episode_id is not None else {}),
        }

    @classmethod
    def reads_free_text(cls) -> bool:
        """Whether free text can be an action: the env maps it to a tool call (`_parse_text`) or reads its actions
        itself (`_act`, as the agent envs read a model's reply)."""
        return cls._parse_text is not TextEnv._parse_text or cls._act is not TextEnv._act

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools in the OpenAI function-calling format, in name order, as `info["tools"]` carries them
        on reset (`gymenvs.core.tools.function_schema` makes each; see there)."""
        return list(self._tool_schemas)

    # -- for subclasses ------------------------------------------------------------------

    def _start_episode(self, options: dict[str, Any]) -> str:
        """Set up a new episode and return its first observation."""
        raise NotImplementedError

    def _act(self, action: Any) -> Outcome:
        """Carry out one action: by default a tool call (`parse_action`, free text read by `_parse_text`) run by
        `_run`. An `ActionError` raised here is the invalid-action observation."""
        return self._run(parse_action(action, self._parse_text))

    def _parse_text(self, text: str) -> ToolCall:
        """The tool call that free text stands for. By default free text is not understood."""
        raise ActionError(f"free text is not understood here; call a tool: {self._tool_list()}")

    def _at_turn_limit(self, outcome: Outcome) -> Outcome:
        """The last step's outcome when the turn limit ends the episode; an env may score the episode here."""
        return outcome

    def _default_ending(self, outcome: Outcome, truncated: bool) -> dict[str, str]:
        """Who ended the episode, when the last step's outcome does not say (`gymenvs.core.outcomes`): a
        tool's `truncated` outcome is infra; otherwise the model, "solved" when the final reward is
        positive, "failed" when not, "turn_limit" at the turn limit."""
        if outcome.truncated and not outcome.terminated:
            return ending(EndedBy.INFRA, "truncated", str(outcome.info.get("error", "")))
        if truncated:
            return ending(EndedBy.MODEL, "turn_limit", f"{self.max_turns} turns")
        return ending(EndedBy.MODEL, "solved" if outcome.reward > 0 else "failed")

    def _observation(self, text: str, info: dict[str, Any]) -> Any:
        """The observation the agent gets for `text`. An env with images returns a `text_image_space`
        dict here and may add to `info` (see `gymenvs.core.images`)."""
        return text

    def _episode_state(self) -> dict[str, Any]:
        """Env-specific, JSON-serializable part of `state()`."""
        return {}

    def _render_ansi(self) -> str:
        return self._last_observation

    # -- internals -----------------------------------------------------------------------

    def _run(self, call: ToolCall) -> Outcome:
        spec = self.tools.get(call.name)
        if spec is None:
            raise ActionError(f"unknown tool {call.name!r}; available: {self._tool_list()}")
        try:  # the validator itself, not `spec.validate`: one Python call fewer per step
            arguments = spec.arguments_validator.validate_python(call.arguments)
        except pydantic.ValidationError as exc:
            raise spec.invalid_arguments(exc) from None
        result = getattr(self, call.name)(**arguments)
        if isinstance(result, Outcome) and isinstance(result.observation, str):
            return result
        if isinstance(result, str):
            return Outcome(result)
        raise self._bad_tool_result(call.name, result)

    def _bad_tool_result(self, tool_name: str, result: Any) -> ToolResultError:
        """The error for a tool that returned neither a str nor an Outcome whose observation is a str."""
        observation = result.observation if isinstance(result, Outcome) else result
        returned = f"an Outcome whose observation is {type(observation).__name__}" if isinstance(result, Outcome) \
            else type(result).__name__
        return ToolResultError(
            f"tool {tool_name!r} of {type(self).__name__} returned {returned} ({short_repr(observation)}): "
            "a tool returns a str or an Outcome(observation: str, ...)"
        )

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise EnvClosedError(f"{method}() on {self._name()} after close(): make a new env with gymnasium.make")

    def _refuse_step(self) -> None:
        """Raise why `step` cannot run now: the env is closed, or has no episode to step."""
        self._check_open("step")
        if self._episode_id is None:
            raise ResetNeeded(f"{self._name()}: call reset() before step()")
        raise ResetNeeded(f"{self._name()}: the episode has ended; call reset() before stepping again")

    def _tool_list(self) -> str:
        return ", ".join(spec.signature() for spec in self.tools.values())

    def _name(self) -> str:
        return self.spec.id if self.spec is not None else type(self).__name__


def checked_reset_options(owner: str, options: Any, accepted: frozenset[str]) -> dict[str, Any]:
    """`options` as a new dict, or a `ResetOptionsError` naming the option that `owner` does not accept."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ResetOptionsError(f"{owner}: reset(options={short_repr(options)}): expected a dict or None; accepted keys: "
                                f"{listing(accepted)}")
    for key in options:
        if key not in accepted:
            raise ResetOptionsError(
                f"{owner}: unknown reset option {key!r}={short_repr(options[key])}{did_you_mean(str(key), accepted)}; "
                f"accepted: {listing(accepted)}"
            )
    return dict(options)
