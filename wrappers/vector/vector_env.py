"""`ConcurrentVectorEnv`: many isolated env instances behind one `gymnasium.vector.VectorEnv`."""

from __future__ import annotations

import atexit
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gymenvs.core.env import checked_reset_options
from gymenvs.core.errors import ActionsError, EnvClosedError, short_repr
from gymenvs.core.outcomes import EndedBy, ending
from wrappers.vector.config import make_config
from wrappers.vector.infos import batch_infos
from wrappers.vector.slot import Command, Request, SlotError

#: How long `close()` waits for envs to close and workers to stop before it kills or abandons them.
CLOSE_TIMEOUT_S = 30.0
#: How long each vector env still open at interpreter exit gets to close.
EXIT_CLOSE_TIMEOUT_S = 0.5

#: The `reset(options=...)` keys the vector env itself reads; the others go to every slot's env.
VECTOR_RESET_OPTIONS = frozenset({"group_size", "reset_mask"})

Seeds = int | Sequence[int | None] | None
StepResult = tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


def _checked_factories(env_fns: Sequence[Callable[[], gym.Env]]) -> list[Callable[[], gym.Env]]:
    factories = list(env_fns)
    if not factories:
        raise ValueError("env_fns=[]: give at least one env factory")
    for index, factory in enumerate(factories):
        if not callable(factory):
            raise ValueError(f"env_fns[{index}]={factory!r}: expected a zero-argument callable that builds an env")
    return factories


class ConcurrentVectorEnv(VectorEnv):
    """Runs `len(env_fns)` env instances ("slots") concurrently, in threads, subprocesses or Ray actors.

    Each slot is built by its own call of its factory, in the worker that runs it, and shares no
    state with the others. Observations come back as a tuple of str (or whatever the envs return),
    rewards, terminated and truncated as numpy arrays, infos in gymnasium's dict-of-arrays form.

    Args:
        env_fns: one zero-argument factory per slot. For the process backend they are pickled with
            cloudpickle, so lambdas and closures work.
        backend: "thread" for envs that wait (containers, tools, network, sleeps): a step that
            blocks releases the GIL and the others run meanwhile. "process" for CPU-bound envs.
            "ray" for slots in Ray actors, on this machine or spread over a Ray cluster.
        max_workers: pool threads, worker processes or Ray actors (default: $GYMENVS_MAX_WORKERS,
            else one per slot). Fewer threads than slots caps how many requests run at once:
            `max_workers` with a deadline, one more without (the caller's thread runs requests
            too). Fewer processes or actors than slots makes worker w host slots w, w + W, ...,
            which it runs on threads of its own, so their steps that wait still overlap
            (`max_workers=1` is one process, not one step at a time); a worker that dies or hangs
            then takes all the slots it hosts with it.
        step_timeout_s: the longest any slot may take to answer a request (reset, step, call).
            A slot that does not answer in time is truncated with `info["error"]` and rebuilt; its
            late reply is dropped. None waits forever. Without a deadline the thread backend also
            runs requests on the caller's thread, which is the fastest path for trivial steps.
        autoreset_mode: gymnasium's `AutoresetMode` (or its value "NextStep", "SameStep",
            "Disabled"). Autoresets pass no seed; reset chosen slots with
            `reset(seed=..., options={"reset_mask": mask})` to seed them.
        restart_on_error: when a slot's env raises in `reset` or `step`, build a fresh env from its
            factory (else keep the env; its next reset reuses it). A worker that died or hung is
            always replaced, since its env is gone or still busy.
        **backend_settings: the chosen backend's own settings (any other keyword is a
            `ValueError` that lists them):

            - thread: `pin_threads` (False; Linux: run the pool threads on one CPU core: under
              the GIL only one of them runs Python at a time anyway, and handing the GIL to a
              thread on the same core is cheaper than waking one on another core; measured on 2
              cores only, see docs/vector.md), `dedicated_threads` (False; True gives each slot
              one thread for its whole life, for envs that must be driven from the thread that
              built them, such as a browser).
            - process: `start_method`, "forkserver" (the default, with gymenvs preloaded),
              "spawn", or "fork" (fastest to start, but unsafe once the parent runs threads).
            - ray: `address` (the cluster to join, e.g. "auto"; default: a local Ray, or the one
              this process already initialised), `num_cpus` (per actor, default 0), `resources`
              (custom resources per actor, e.g. {"docker": 1}), `actor_options` (any other
              option of Ray's `.options()`).

    Partial steps: an action of None leaves that slot untouched (its observation is returned
    unchanged, reward 0, not terminated or truncated, no info), so LLM episodes that end at
    different turns can be stepped together. A slot whose env raises, whose worker dies or that
    misses `step_timeout_s` is truncated with `info["error"]` and rebuilt; the other slots never
    notice. Not thread-safe: call it from one thread at a time.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        backend: str = "thread",
        max_workers: int | None = None,
        step_timeout_s: float | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        restart_on_error: bool = True,
        **backend_settings: Any,
    ):
        self.config, self.backend_settings = make_config(
            backend=backend,
            max_workers=max_workers,
            step_timeout_s=step_timeout_s,
            autoreset_mode=autoreset_mode,
            restart_on_error=restart_on_error,
            **backend_settings,
        )
        factories = _checked_factories(env_fns)
        self.num_envs = len(factories)
        self.autoreset_mode = self.config.autoreset_mode
        self._step_timeout_s = self.config.step_timeout_s
        self._step_command = Command.STEP_SAME if self.autoreset_mode == AutoresetMode.SAME_STEP else Command.STEP
        self._observations: list[Any] = [""] * self.num_envs
        self._needs_reset = [True] * self.num_envs
        self._was_reset = False
        #: Slots whose last request was cut short by an exception in the caller (Ctrl-C), with why.
        self._interrupted: dict[int, str] = {}
        self._start(factories)

    def _start(self, factories: list[Callable[[], gym.Env]]) -> None:
        """Start the backend's workers, build every slot in them, and take the spaces from the slots."""
        self._backend = self.config.backend_class.start(
            factories,
            max_workers=self.config.workers_for(self.num_envs),
            restart_on_error=self.config.restart_on_error,
            settings=self.backend_settings,
        )
        _OPEN.add(self)
        try:
            observation_space, action_space, metadata, self._reset_option_keys = self._build_slots()
        except BaseException:
            self.close()
            raise
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}

    # -- the gymnasium API ---------------------------------------------------------------

    def reset(self, seed: Seeds = None, options: dict[str, Any] | None = None) -> tuple[tuple[Any, ...], dict]:
        """Reset every slot, or the slots in `options["reset_mask"]`.

        `seed`: an int gives slot i the seed `seed + i`; a list gives one seed (or None) per slot.
        `options["group_size"] = G` gives each run of G consecutive slots one seed (`seed + i // G`,
        a random one when `seed` is None), so a GRPO group starts from one state. Other options go
        to every env's `reset`.
        """
        self._check_open("reset")
        options = self._checked_options(options)
        group_size = options.pop("group_size", None)
        slots = self._masked_slots(options.pop("reset_mask", None))
        seeds = self._slot_seeds(seed, group_size)
        env_options = options or None
        requests = [(index, Command.RESET, (seeds[index], env_options)) for index in slots]
        for index in slots:
            self._interrupted.pop(index, None)
        results = self._run(requests)
        self._raise_callers_error(requests, results)
        infos = []
        for (index, _, _), result in zip(requests, results):
            if type(result) is SlotError:
                self._observations[index] = result.message
                self._needs_reset[index] = True
                infos.append((index, _failure_info(result)))
            else:
                self._observations[index], info = result
                self._needs_reset[index] = False
                infos.append((index, info))
        self._was_reset = True
        return tuple(self._observations), batch_infos(infos, self.num_envs)

    def step(self, actions: Sequence[Any]) -> StepResult:
        """Step every slot whose action is not None; see the class docstring for partial steps."""
        requests, failed = self._step_requests(actions)
        results = self._run(requests)
        observations = self._observations
        needs_reset = self._needs_reset
        rewards = [0.0] * self.num_envs
        terminated = [False] * self.num_envs
        truncated = [False] * self.num_envs
        infos = []
        step, reset = Command.STEP, Command.RESET  # an enum member costs a Python call to look up
        for (index, command, _), result in zip(requests, results):
            if type(result) is SlotError:
                failed.append((index, result))
                continue
            if command is step:
                observations[index], rewards[index], terminated[index], truncated[index], info = result
                needs_reset[index] = terminated[index] or truncated[index]
            elif command is reset:  # next-step autoreset
                observations[index], info = result
                needs_reset[index] = False
            else:  # step_same: the step, and the reset that followed if the episode ended
                observations[index], rewards[index], terminated[index], truncated[index], info, final = result
                if final is not None:
                    info = {**info, "final_obs": final[0], "final_info": final[1]}
            if info:
                infos.append((index, info))
        if failed:
            infos.extend(self._handle_failures(failed, truncated))
        n = self.num_envs
        return (  # np.fromiter: a quarter cheaper than np.array on a list of Python scalars
            tuple(observations),
            np.fromiter(rewards, np.float64, n),
            np.fromiter(terminated, np.bool_, n),
            np.fromiter(truncated, np.bool_, n),
            batch_infos(infos, n),
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method `name` of every slot's env (or read attribute `name`); one result per slot."""
        return self._ask_every_slot(Command.CALL, (name, args, kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute `name` of every slot's env (as in gymnasium, a method is called)."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute `name` on every slot's env: `values` is one value per slot, or one for all."""
        self._check_open("set_attr")
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr({name!r}): got {len(values)} values for {self.num_envs} slots")
        requests: list[Request] = [(index, Command.SET_ATTR, (name, value)) for index, value in enumerate(values)]
        self._raise_failures(self._run(requests))

    def state(self) -> tuple[dict[str, Any], ...]:
        """Every slot's `env.unwrapped.state()`, a JSON-serializable snapshot of its episode."""
        return self._ask_every_slot(Command.STATE, None)

    def render(self) -> tuple[Any, ...]:
        return self.call("render")

    def close_extras(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Close every env and stop every worker (`close(timeout_s=...)`: how long to wait for them)."""
        backend = getattr(self, "_backend", None)
        if backend is not None:
            backend.close(timeout_s)

    def __enter__(self) -> ConcurrentVectorEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self.closed:
                self.close()
        except Exception:
            pass  # at interpreter exit modules may already be gone

    # -- internals -----------------------------------------------------------------------

    def _build_slots(self) -> tuple[gym.Space, gym.Space, dict[str, Any], frozenset[str] | None]:
        """Build every slot; the first one's spaces and metadata, and the reset options every slot accepts
        (None when some slot's env does not say)."""
        results = self._backend.run([(index, Command.BUILD, None) for index in range(self.num_envs)], None)
        self._raise_failures(results)
        option_keys = [result[3] for result in results]
        known = None if any(keys is None for keys in option_keys) else frozenset.intersection(*option_keys)
        return *results[0][:3], known

    def _run(self, requests: list[Request]) -> list[Any]:
        try:
            return self._backend.run(requests, self._step_timeout_s)
        except BaseException as exc:  # KeyboardInterrupt: these slots' results are lost to the caller
            message = f"the last call was interrupted by {type(exc).__name__}; the episode is truncated"
            for index, _, _ in requests:
                self._interrupted[index] = message
            raise

    def _step_requests(self, actions: Sequence[Any]) -> tuple[list[Request], list[tuple[int, SlotError]]]:
        """The requests for a step, and the slots that fail without one (an earlier step was interrupted)."""
        self._check_open("step")
        if isinstance(actions, str | bytes) or not isinstance(actions, Sequence | np.ndarray):
            raise ActionsError(
                f"step(actions={short_repr(actions)}): expected a list or tuple of {self.num_envs} actions, one per "
                f"slot (None skips a slot), got a {type(actions).__name__}"
            )
        if not self._was_reset:
            raise ResetNeeded("call reset() before step()")
        if len(actions) != self.num_envs:
            raise ValueError(f"step() got {len(actions)} actions for {self.num_envs} slots (None skips a slot)")
        requests: list[Request] = []
        failed = []
        request, interrupted, needs_reset, step = requests.append, self._interrupted, self._needs_reset, self._step_command
        for index, action in enumerate(actions):
            if action is None:
                continue
            if interrupted and index in interrupted:
                failed.append((index, SlotError(interrupted[index], rebuilt=True, reason="interrupted")))
            elif needs_reset[index]:
                request((index, Command.RESET, (None, None)))
            else:
                request((index, step, action))
        if self.autoreset_mode == AutoresetMode.DISABLED:
            ended = [index for index, command, _ in requests if command is Command.RESET]
            if ended:
                raise ResetNeeded(
                    f"slots {ended} have ended their episodes and autoreset is disabled: reset them with "
                    "reset(options={'reset_mask': mask}), or give them None as action"
                )
        for index, _ in failed:
            del self._interrupted[index]
        return requests, failed

    def _handle_failures(self, failed: list[tuple[int, SlotError]], truncated: list[bool]) -> list[tuple[int, dict]]:
        """Truncate each failed slot with `info["error"]` and an infra ending (`SlotError.reason`); in
        same-step mode, also reset it now."""
        for index, error in failed:
            truncated[index] = True
            self._observations[index] = error.message
            self._needs_reset[index] = True
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            return self._reset_failed_slots(failed)
        return [(index, _failure_info(error)) for index, error in failed]

    def _reset_failed_slots(self, failed: list[tuple[int, SlotError]]) -> list[tuple[int, dict]]:
        """Same-step autoreset of failed slots: the error becomes the final observation."""
        requests: list[Request] = [(index, Command.RESET, (None, None)) for index, _ in failed]
        infos = []
        for (index, error), result in zip(failed, self._run(requests)):
            info = {**_failure_info(error), "final_obs": error.message, "final_info": _failure_info(error)}
            if type(result) is SlotError:  # the reset failed too: the next step tries again
                info["error"] = f"{error.message}; then the reset failed: {result.message}"
            else:
                self._observations[index], reset_info = result
                self._needs_reset[index] = False
                info = {**reset_info, **info}
            infos.append((index, info))
        return infos

    def _ask_every_slot(self, command: Command, argument: Any) -> tuple[Any, ...]:
        self._check_open(command.value)
        results = self._run([(index, command, argument) for index in range(self.num_envs)])
        self._raise_failures(results)
        return tuple(results)

    def _check_open(self, method: str) -> None:
        if self.closed:
            raise EnvClosedError(f"{method}() on a ConcurrentVectorEnv after close(): make a new one")

    def _checked_options(self, options: Any) -> dict[str, Any]:
        """The options as a new dict; an option that no slot's env accepts is a `ResetOptionsError` here,
        before any slot is reset."""
        accepted = VECTOR_RESET_OPTIONS | (self._reset_option_keys or set())
        if self._reset_option_keys is None and isinstance(options, dict):
            return dict(options)  # some slot's env does not say what it accepts: it checks for itself
        return checked_reset_options("ConcurrentVectorEnv", options, frozenset(accepted))

    def _raise_callers_error(self, requests: list[Request], results: list[Any]) -> None:
        """Raise an env's verdict that the caller's reset options are bad (a value it refuses) in the
        caller. No slot is rebuilt; every slot of the reset needs another one (those that refused have no
        episode, the others started one whose first observation the caller never saw)."""
        errors = [(index, result) for (index, _, _), result in zip(requests, results)
                  if type(result) is SlotError and result.is_callers]
        if errors:
            for index, _, _ in requests:
                self._needs_reset[index] = True
            errors[0][1].reraise(errors[0][0])

    def _raise_failures(self, results: list[Any]) -> None:
        for index, result in enumerate(results):
            if type(result) is SlotError and result.rebuilt:
                self._observations[index] = result.message
                self._needs_reset[index] = True
        for index, result in enumerate(results):
            if type(result) is SlotError:
                result.reraise(index)

    def _masked_slots(self, mask: Any) -> list[int]:
        if mask is None:
            return list(range(self.num_envs))
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask']: expected a bool array of shape ({self.num_envs},), "
                f"got dtype {mask.dtype} and shape {mask.shape}"
            )
        return np.flatnonzero(mask).tolist()

    def _slot_seeds(self, seed: Any, group_size: Any) -> list[int | None]:
        n = self.num_envs
        if group_size is not None:
            if type(group_size) is not int or group_size <= 0 or n % group_size:
                allowed = f"a positive integer that divides num_envs={n}"
                raise ValueError(f"options['group_size']={group_size!r}: expected {allowed}")
            if seed is None:  # a group still has to share its start state
                seed = int(self.np_random.integers(2**31 - 1 - n))
        if seed is None:
            return [None] * n
        if _is_seed(seed):
            stride = group_size or 1
            return [int(seed) + index // stride for index in range(n)]
        if isinstance(seed, Sequence) and not isinstance(seed, str):
            if len(seed) != n or not all(s is None or _is_seed(s) for s in seed):
                raise ValueError(f"seed={seed!r}: a list of seeds needs one non-negative int (or None) per slot ({n})")
            return [None if s is None else int(s) for s in seed]
        raise ValueError(f"seed={seed!r}: expected None, a non-negative int, or one seed per slot")


def _is_seed(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and bool(value >= 0)


#: Vector envs not closed yet. At interpreter exit their pool threads are about to be frozen, so
#: `close()` from a finaliser would wait for them in vain: they are closed (briefly) before that.
_OPEN: weakref.WeakSet[ConcurrentVectorEnv] = weakref.WeakSet()


@atexit.register
def _close_open_vector_envs() -> None:
    for envs in list(_OPEN):
        try:
            if not envs.closed:
                envs.close(timeout_s=EXIT_CLOSE_TIMEOUT_S)
        except Exception:
            pass


def _failure_info(error: SlotError) -> dict[str, Any]:
    """The info of a slot whose episode `error` ended: the error, and that the infrastructure ended it."""
    return {"error": error.message, **ending(EndedBy.INFRA, error.reason, error.message)}
