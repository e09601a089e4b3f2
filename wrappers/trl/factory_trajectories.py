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

A write that fails inside a tool call is raised by the next `reset`: TRL would show an exception raised there to the
model, as the tool's result.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymenvs.core.outcomes import DETAIL_KEY
from gymenvs.trajectories import TrajectoryRecorder, write_trajectory
from gymenvs.trajectories.env_steps import record_step, start_recording
from gymenvs.trajectories.recorder import EXTRA_KEY

if TYPE_CHECKING:
    import atif
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
        self._failed_write: Exception | None = None

    def start(self, env: gym.Env, observation: Any, info: dict[str, Any], *, seed: int, retries: int,
              failed: bool) -> None:
        """Record the episode a reset of `env` began with `observation` (`failed`: no try worked, and `observation`
        says why), after writing the one it cuts short. Raises a write that failed in a tool call."""
        failed_write, self._failed_write = self._failed_write, None
        if failed_write is not None:
            raise failed_write
        self._write_cut_short()
        self._recorder = start_recording(env, observation, info, seed=seed, agent_name=AGENT_NAME)
        self._recorder.extra[EXTRA_KEY].update(environment=self.environment, retries=retries)
        self._return, self._info = 0.0, info
        self._started = self._last_step = time.perf_counter()
        if failed:
            write_trajectory(self._finish("failed", error=str(info.get(DETAIL_KEY) or observation)), self.directory)

    def step(self, call: dict[str, Any], observation: Any, reward: float, info: dict[str, Any], *, terminated: bool,
             truncated: bool) -> None:
        """Record a tool call and what the env's step returned; write the episode if it ended."""
        if self._recorder is None:
            return
        record_step(self._recorder, call, observation, reward, info)
        self._return += reward
        self._info, self._last_step = info, time.perf_counter()
        if terminated or truncated:
            self._write_in_a_tool(self._finish("terminated" if terminated else "truncated"))

    def step_raised(self, call: dict[str, Any], error: Exception) -> None:
        """Record a tool call whose env step raised, with the result TRL shows the model."""
        if self._recorder is not None:
            record_step(self._recorder, call, str({"error": str(error)}), 0.0, {"error": repr(error)})
            self._last_step = time.perf_counter()

    def close(self) -> None:
        """Write the episode being played, if any, as cut short (the instance is closed or collected, or the
        interpreter exits); log a write that failed in a tool call, which no `reset` will raise now."""
        if self._failed_write is not None:
            logger.error("a trajectory could not be written into %s: %r", self.directory, self._failed_write)
            self._failed_write = None
        self._write_cut_short()

    def _write_cut_short(self) -> None:
        if self._recorder is not None:
            write_trajectory(self._finish("truncated", end_reason=CUT_SHORT), self.directory)

    def _finish(self, end: str, *, end_reason: str | None = None, error: str | None = None) -> atif.Trajectory:
        recorder, self._recorder = self._recorder, None
        assert recorder is not None
        if end_reason is not None:
            recorder.extra[EXTRA_KEY]["end_reason"] = end_reason
        return recorder.finish(reward=self._return, info=self._info, seconds=self._last_step - self._started, end=end,
                               error=error)

    def _write_in_a_tool(self, trajectory: atif.Trajectory) -> None:
        try:
            write_trajectory(trajectory, self.directory)
        except Exception as error:  # raised by the next reset, not shown to the model
            self._failed_write = error
