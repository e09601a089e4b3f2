"""`environment_factory(..., trajectories=DIR)`: each instance's episodes as ATIF trajectories, as the env saw them.

TRL shows an `environment_factory` instance neither the model's text nor its tokens: it calls `reset`, then the
method of each tool call the model makes, then `get_reward`. (Its reward functions get each completion's token ids,
but not their logprobs nor which of them the tools wrote, and only their order links them to an instance.) So a
trajectory here holds the conversation as the env saw it: the reset's observation as a user step, each tool call as
an agent step (the call, the env's observation, the step's reward and error), and how the episode ended; no token
ids, no logprobs, nothing the model wrote outside its tool calls. `make_rollout_func(..., trajectories=DIR)` records
the tokens that trained.

The files go to `DIR/rank-<RANK>/` (RANK: the process's rank in a distributed run, else 0), named by
`write_trajectory`, which never overwrites a file. An episode is written once:

- when the env ends it (terminated or truncated), at the tool call that ended it; one whose reset failed every try at
  that reset, as "failed";
- else when it is cut short: at the instance's next `reset`, or when the instance is closed or collected or the
  interpreter exits (TRL never closes its pooled instances: the last batch's episodes are written then). TRL stopped
  calling the env's tools before the env ended the episode (the model answered without a tool call, or ran out of
  tool calls or tokens): "truncated", with `end_reason` "cut_short".

The tool call or reset that ends an episode hands it to a thread of its own, which builds the trajectory and writes
it (that would otherwise cost the call about half a millisecond: docs/trajectories.md). The instance's next `reset`
and its close wait for its writes, and a write that failed is raised by the next `reset` (never inside a tool call:
TRL would show the exception to the model, as the tool's result).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymenvs.core.outcomes import DETAIL_KEY
from gymenvs.trajectories import TrajectoryRecorder, write_trajectory
from gymenvs.trajectories.env_steps import record_step, start_recording
from gymenvs.trajectories.recorder import EXTRA_KEY

if TYPE_CHECKING:
    import gymnasium as gym

AGENT_NAME = "gymenvs-environment-factory"
#: The `end_reason` of an episode that TRL stopped playing before the env ended it.
CUT_SHORT = "cut_short"
logger = logging.getLogger(__name__)


class FactoryRecording:
    """The episodes of one `environment_factory` instance, one after another, each recorded as it is played and
    written when it ends (module docstring).

    Args:
        directory: the `trajectories=` folder; the files go to its `rank-<RANK>/`.
        environment: the instance's class name (TRL's name for the env and its reward column).
    """

    def __init__(self, directory: Path, environment: str):
        self.directory = directory / f"rank-{os.environ.get('RANK', '0')}"
        self.environment = environment
        self._recorder: TrajectoryRecorder | None = None
        self._return = 0.0
        self._info: dict[str, Any] = {}
        self._started = self._last_step = 0.0
        self._pending: list[Future] = []

    def start(self, env: gym.Env, observation: Any, info: dict[str, Any], *, seed: int, retries: int,
              failed: bool) -> None:
        """Record the episode a reset of `env` began with `observation` (`failed`: no try worked, and `observation`
        says why), after writing the one it cuts short. Raises a write of an earlier episode that failed."""
        self.flush()
        if self._recorder is not None:
            self._write("truncated", end_reason=CUT_SHORT)
        self._recorder = start_recording(env, observation, info, seed=seed, agent_name=AGENT_NAME)
        self._recorder.extra[EXTRA_KEY].update(environment=self.environment, retries=retries)
        self._return, self._info = 0.0, info
        self._started = self._last_step = time.perf_counter()
        if failed:
            self._write("failed", error=str(info.get(DETAIL_KEY) or observation))

    def step(self, call: dict[str, Any], observation: Any, reward: float, info: dict[str, Any], *, terminated: bool,
             truncated: bool) -> None:
        """Record a tool call and what the env's step returned; write the episode if it ended."""
        if self._recorder is None:
            return
        record_step(self._recorder, call, observation, reward, info)
        self._return += reward
        self._info, self._last_step = info, time.perf_counter()
        if terminated or truncated:
            self._write("terminated" if terminated else "truncated")

    def step_raised(self, call: dict[str, Any], error: Exception) -> None:
        """Record a tool call whose env step raised, with the result TRL shows the model."""
        if self._recorder is not None:
            record_step(self._recorder, call, str({"error": str(error)}), 0.0, {"error": repr(error)})
            self._last_step = time.perf_counter()

    def close(self) -> None:
        """Write the episode being played, if any, as cut short (the instance is closed or collected, or the
        interpreter exits), and wait for the writes; log one that failed, which no `reset` will raise now."""
        if self._recorder is not None:
            self._write("truncated", end_reason=CUT_SHORT)
        try:
            self.flush()
        except Exception as error:
            logger.error("a trajectory could not be written into %s: %r", self.directory, error)

    def flush(self) -> None:
        """Wait until this instance's episodes are written; raise the first write that failed."""
        pending, self._pending = self._pending, []
        failures = [error for error in (future.exception() for future in pending) if error is not None]
        if failures:
            raise failures[0]

    def _write(self, end: str, *, end_reason: str | None = None, error: str | None = None) -> None:
        """Finish the episode being recorded and write it, in the writing thread."""
        recorder, self._recorder = self._recorder, None
        assert recorder is not None
        if end_reason is not None:
            recorder.extra[EXTRA_KEY]["end_reason"] = end_reason
        job = functools.partial(_finish_and_write, recorder, self.directory, reward=self._return, info=self._info,
                                seconds=self._last_step - self._started, end=end, error=error)
        try:
            self._pending.append(_writing_thread().submit(job))
        except RuntimeError:  # the interpreter is exiting and its threads are gone: write it here
            job()


def _finish_and_write(recorder: TrajectoryRecorder, directory: Path, **finish: Any) -> None:
    write_trajectory(recorder.finish(**finish), directory)


_writer_lock = threading.Lock()
_writer: ThreadPoolExecutor | None = None


def _writing_thread() -> ThreadPoolExecutor:
    """The one thread that writes the trajectories of every instance of the process, started with the first (the
    interpreter waits for its last writes when it exits)."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = ThreadPoolExecutor(1, thread_name_prefix="gymenvs-factory-trajectories")
        return _writer
