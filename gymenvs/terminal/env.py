"""Terminal-v0 and TerminalAgent-v0: Harbor tasks (Terminal-Bench 2 and its adapters) as gymnasium envs.

Terminal-v0 is SWE-v0's policy env (the same bash / file tools, the same sandbox) on Harbor tasks;
TerminalAgent-v0 is SWEAgent-v0 (the reference agent, mini-swe-agent, ... with interception and exact
tokens) on them. `TerminalTasks` (gymenvs/terminal/base.py) is what differs: the tasks, their images
and limits, and grading by the task's own tests where the agent cannot reach.
"""

from __future__ import annotations

from typing import Any, ClassVar

from gymenvs.swe.agents.env import AgentOptions, SWEAgentEnv
from gymenvs.swe.base import EpisodeConfig
from gymenvs.swe.env import SWEEnv
from gymenvs.terminal.base import TerminalConfig, TerminalTasks

_PROMPT = """{instruction}

You work in a Linux container, in {workdir}. Tools: `bash` runs a command in a persistent shell (the \
working directory and variables carry over; each command may take {timeout:g} s; long output is cut in \
the middle); `view_file`, `edit_file` and `create_file` work on files; `submit` ends the episode. The \
task's tests, which you do not see, then check the state you left in the container."""


class TerminalEnv(TerminalTasks, SWEEnv):
    """Terminal-v0. One Harbor task per episode, in a container of its environment/ image with the task's
    cpus, memory, storage and network. The policy reads instruction.md and acts with SWE-v0's tools;
    after `submit` (or at the turn limit) the task's tests/test.sh grades the container's state
    (`gymenvs.terminal.grading.grade_task`): the reward is its reward.txt, or reward.json's "reward"
    (its named scores in `info["scores"]`). `reset(options={"task": name})` (or "instance_id") picks a task by its name.

    Args:
        config: a `gymenvs.terminal.base.TerminalConfig`; its fields (`dataset=`, `instance_ids=`,
            `internet=`, `verifier_timeout_s=`, `warm_pool=`, ...) may also be keyword arguments.
        max_turns: turns allowed; the work is graded when they run out.
        render_mode: None or "ansi".
    """

    def _prompt(self, task: Any) -> str:
        return _PROMPT.format(instruction=task.instruction.strip(), workdir=self.workdir,
                              timeout=self.config.command_timeout_s)


class TerminalAgentConfig(TerminalConfig, AgentOptions):
    """`TerminalConfig` plus the agent harness's options (`gymenvs.swe.agents.env.AgentOptions`)."""

    model_config = TerminalConfig.model_config | {"arbitrary_types_allowed": True}


class TerminalAgentEnv(TerminalTasks, SWEAgentEnv):
    """TerminalAgent-v0. SWEAgent-v0's agents (`agent="reference"`, `"mini-swe-agent"`, an `AgentSpec`) on
    Harbor tasks: the agent reads instruction.md from its task file and works in the task's WORKDIR; its
    LLM calls are the observations (interception) or go to an upstream (black-box); the episode's wall-clock
    limit is the task's [agent] timeout_sec (at most `episode_timeout_s`). Graded as Terminal-v0.

    Args:
        config: a `TerminalAgentConfig` (or its fields as keyword arguments: `agent=`, `mode=`, `dataset=`, ...).
        max_turns: replies allowed; the work is graded when they run out.
        render_mode: None or "ansi".
    """

    config_class: ClassVar[type[EpisodeConfig]] = TerminalAgentConfig

    def episode_timeout_s(self) -> float:
        """The task's [agent] timeout_sec, capped by `episode_timeout_s`."""
        return min(self.config.episode_timeout_s, self.episode_task.config.agent.timeout_sec)
