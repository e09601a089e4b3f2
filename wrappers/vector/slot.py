"""One slot of a vector env: an environment instance and the requests a worker runs on it.

Every backend runs the same `Slot` code (in pool threads, worker processes or Ray actors), so a
slot behaves the same whatever carries it. A request never raises: an exception comes back as a
`SlotError` value, and the vector env decides what it means for the episode.
"""

from __future__ import annotations

import enum
import logging
import pickle
import threading
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

from gymenvs.core.errors import ConfigError, ResetOptionsError
from gymenvs.core.outcomes import InfraError

logger = logging.getLogger(__name__)

EnvFactory = Callable[[], gym.Env]


class Command(enum.Enum):
    """What a request asks of a slot. Each member names the `Slot` method that carries it out."""

    BUILD = "build"
    RESET = "reset"
    STEP = "step"
    STEP_SAME = "step_same"  # step, and reset at once if the episode ended (same-step autoreset)
    CALL = "call"
    SET_ATTR = "set_attr"
    STATE = "state"
    CLOSE = "close"

    #: Members are singletons (unpickling one gives the same object back), so identity is their hash: `Enum`'s
    #: own `__hash__` is a Python call, made on every `_HANDLERS` lookup, once per slot and step.
    __hash__ = object.__hash__

    @property
    def ends_episode_on_error(self) -> bool:
        return self in (Command.RESET, Command.STEP, Command.STEP_SAME)


#: A request to one slot: (slot index, command, its one argument). A plain tuple rather than a named one: the vector
#: env builds one per slot and step, and a plain tuple costs about a fifth as much to build and to free.
Request = tuple[int, Command, Any]


class SlotError:
    """A request that failed: the slot's env raised, its worker died, or it missed its deadline.

    `exception` is the original exception when there is one (and it survived the trip from a worker
    process), so `call` and construction can re-raise it with its own type. `rebuilt` says that the
    slot's env was dropped (to be built afresh by its factory), so its episode is over. `reason` is
    the `outcome_reason` of the episode it ends (always infra, `gymenvs.core.outcomes`):
    "env_exception" (the env raised; a `gymenvs.core.InfraError` gives its own `reason`), "step_timeout"
    (no reply within `step_timeout_s`; every backend words it with `timed_out`) or "slot_crashed"
    (its worker died, or its reply was lost).
    """

    __slots__ = ("message", "exception", "rebuilt", "reason")

    def __init__(self, message: str, exception: BaseException | None = None, *, rebuilt: bool = False,
                 reason: str | None = None):
        self.message = message
        self.exception = exception
        self.rebuilt = rebuilt
        self.reason = reason or _reason(message, exception)

    def __repr__(self) -> str:
        return f"SlotError({self.message!r})"

    def portable(self) -> SlotError:
        """This error, without its exception if that would not survive pickling and unpickling.

        Workers send errors back pickled; an exception class whose constructor takes other
        arguments than it stores pickles fine but fails to unpickle, on the caller's side."""
        if self.exception is None:
            return self
        try:
            pickle.loads(pickle.dumps(self.exception))
        except Exception:
            return SlotError(self.message, rebuilt=self.rebuilt, reason=self.reason)
        return self

    def reraise(self, slot: int) -> None:
        """Raise the original exception (or a `RuntimeError`), noting which slot it came from. The
        caller's own mistakes (`CALLER_ERRORS`) lose the worker's frames: their message says it all."""
        exception = self.exception if self.exception is not None else RuntimeError(self.message)
        exception.add_note(f"(in slot {slot} of a ConcurrentVectorEnv)")
        if self.is_callers:
            raise exception.with_traceback(None)
        raise exception

    @property
    def is_callers(self) -> bool:
        """Whether the request failed for the caller's mistake (a bad argument), not the env's."""
        return isinstance(self.exception, CALLER_ERRORS)


#: Mistakes of the caller that an env reports (an unknown constructor argument or reset option): the
#: vector env raises them in the caller and neither logs them nor rebuilds the slot.
CALLER_ERRORS = (ConfigError, ResetOptionsError)

#: How every backend words a request that got no reply in time; `SlotError` reads its reason back from it.
_TIMED_OUT = "timed out (no reply within step_timeout_s="


def rearm_first_reset_check(env: gym.Env) -> None:
    """Let the next reset of `env` be the one gymnasium's `PassiveEnvChecker` checks. The checker marks
    its first reset as checked before running it; when that reset raised (a bad option value), its
    first step would fail unpacking the reset's result that never came (a `TypeError`)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, PassiveEnvChecker) and not env.checked_step:
            env.checked_reset = False
        env = env.env


def settled_step(env: gym.Env) -> Callable[[Any], Any]:
    """The `step` of `env` past the wrappers of `gymnasium.make` that only pass a step on once their checks are
    done: `OrderEnforcing` after a reset, `PassiveEnvChecker` after its first step. Skipping them changes nothing
    but the cost of a step (a Python call each); any other wrapper, or a subclass of these, is kept."""
    while (type(env) is OrderEnforcing and env.has_reset) or (type(env) is PassiveEnvChecker and env.checked_step):
        env = env.env
    return env.step


def timed_out(timeout_s: float | None) -> str:
    """What a backend says of a request that got no reply within `step_timeout_s`."""
    return f"{_TIMED_OUT}{timeout_s} s)"


def _reason(message: str, exception: BaseException | None) -> str:
    if isinstance(exception, InfraError):  # the env knows which part of the infrastructure failed
        return exception.reason
    if exception is not None:
        return "env_exception"
    return "step_timeout" if _TIMED_OUT in message else "slot_crashed"


class Slot:
    """An env built from `factory` on first use, and the requests a vector env makes of it.

    `restart_on_error`: after the env raises in `reset` or `step`, close it and build a fresh one
    for the next request (else keep it; its next `reset` reuses it).
    """

    def __init__(self, index: int, factory: EnvFactory, restart_on_error: bool = True):
        self.index = index
        self.factory = factory
        self.restart_on_error = restart_on_error
        self.env: gym.Env | None = None
        #: Between two steps with no other request in between: the `step` that the next step calls
        #: (`settled_step`), else None.
        self.next_step: Callable[[Any], Any] | None = None

    def run(self, command: Command, argument: Any) -> Any:
        """Run one request; its result, or a `SlotError` saying why there is none."""
        try:
            if command is STEP and self.next_step is not None:  # the hot path: one call, no handler lookup
                return self.next_step(argument)
            self.next_step = None  # any other request may change the env or its wrappers
            return _HANDLERS[command](self, argument)
        except BaseException as exc:
            return self.failed(command, exc)

    def failed(self, command: Command, exc: BaseException) -> SlotError:
        """The result of a request that raised `exc` (called in the `except` block that caught it): a `SlotError`,
        the env rebuilt if need be, or `exc` raised again when it is not the env's failure (`raised_by_the_env`)."""
        self.next_step = None
        if not raised_by_the_env(exc):
            raise  # the exception being handled, `exc`
        return self._failed(command, exc)

    # -- requests (each takes one argument) ---------------------------------------------

    def build(self, _: Any = None) -> tuple[gym.Space, gym.Space, dict[str, Any], frozenset[str] | None]:
        """Build the env; its spaces and metadata, for the vector env to describe itself, and the
        `reset(options=...)` keys it accepts (a `TextEnv`'s `reset_option_keys`; None: not known)."""
        env = self._env()
        option_keys = getattr(env.unwrapped, "reset_option_keys", None)
        return env.observation_space, env.action_space, dict(env.metadata), option_keys

    def reset(self, seed_and_options: tuple[int | None, dict[str, Any] | None]) -> tuple[Any, dict[str, Any]]:
        seed, options = seed_and_options
        env = self._env()
        try:
            return env.reset(seed=seed, options=options)
        except CALLER_ERRORS:  # the slot keeps its env
            rearm_first_reset_check(env)
            raise

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        env = self._env()
        result = env.step(action)
        self.next_step = settled_step(env)
        return result

    def step_same(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any], tuple[Any, dict] | None]:
        """`step`, and when the episode ends, reset in the same request (same-step autoreset).

        The last element is `(final_obs, final_info)` of the episode that ended, or None.
        """
        env = self._env()
        observation, reward, terminated, truncated, info = env.step(action)
        if not (terminated or truncated):
            return observation, reward, terminated, truncated, info, None
        final = (observation, info)
        observation, info = env.reset()
        return observation, reward, terminated, truncated, info, final

    def call(self, request: tuple[str, tuple, dict]) -> Any:
        name, args, kwargs = request
        attribute = self._env().get_wrapper_attr(name)
        return attribute(*args, **kwargs) if callable(attribute) else attribute

    def set_attr(self, name_and_value: tuple[str, Any]) -> None:
        name, value = name_and_value
        self._env().set_wrapper_attr(name, value)

    def state(self, _: Any = None) -> dict[str, Any]:
        env: Any = self._env().unwrapped  # a TextEnv, or any env with a `state()`
        return env.state()

    def close(self, _: Any = None) -> None:
        env, self.env = self.env, None
        if env is not None:
            env.close()

    # -- internals -----------------------------------------------------------------------

    def _env(self) -> gym.Env:
        if self.env is None:
            self.env = self.factory()
        return self.env

    def _failed(self, command: Command, exc: BaseException) -> SlotError:
        message = f"{type(exc).__name__} in {command.value}: {exc}"
        if isinstance(exc, CALLER_ERRORS):  # the caller's mistake, raised in the caller: the env is fine
            return SlotError(message, exc)
        logger.warning("slot %d: %s raised", self.index, command.value, exc_info=exc)
        rebuild = command.ends_episode_on_error and self.restart_on_error
        if rebuild:
            self.close_quietly()
            message += " (the env will be rebuilt from its factory)"
        return SlotError(message, exc, rebuilt=rebuild)

    def close_quietly(self) -> None:
        """Close the env, ignoring its errors: used when it has already failed or been given up."""
        try:
            self.close()
        except Exception:
            logger.debug("slot %d: close failed", self.index, exc_info=True)


_HANDLERS: dict[Command, Callable[[Slot, Any], Any]] = {command: getattr(Slot, command.value) for command in Command}
STEP = Command.STEP  # looking an enum member up is a Python call

#: True in a worker process or Ray actor, where Ctrl-C is not the user's: every exception is the env's.
_in_worker = False


def run_as_worker() -> None:
    """Say that this process only serves slots (a worker process or a Ray actor)."""
    global _in_worker
    _in_worker = True


def raised_by_the_env(exc: BaseException) -> bool:
    """Whether `exc` is the env's failure (reported as a `SlotError`) rather than the caller's own.

    Every exception is the env's, including `SystemExit`, `asyncio.CancelledError`, and a
    `KeyboardInterrupt` the env raised itself, except a `KeyboardInterrupt` on the main thread of
    the user's process: that is Ctrl-C stopping the program, so it propagates.
    `GeneratorExit` always propagates.
    """
    if isinstance(exc, GeneratorExit):
        return False
    if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
        return _in_worker
    return True
