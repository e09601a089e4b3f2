"""What Terminal-v0 and TerminalAgent-v0 add to the SWE envs: Harbor tasks instead of SWE-bench rows.

The SWE envs (`gymenvs.swe.env.SWEEnv`, `gymenvs.swe.agents.env.SWEAgentEnv`) own the sandbox, the
tools and the agent harness; `SWEBaseEnv` asks its task family a few questions (`_load_tasks`,
`_limits_for`, `task_image`, `task_text`, `_grade_and_end`). `TerminalTasks` answers them for Harbor
tasks and is mixed in before an SWE env: the task's image built from environment/, its container
limits from task.toml, its instruction, and grading by `grade_task` (gymenvs/terminal/grading.py),
which the agent's container cannot reach.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import PositiveFloat

from gymenvs.core import EndedBy, ResetOptionsError
from gymenvs.swe.base import EpisodeConfig, grade_ending, sandbox_ending, select_tasks
from gymenvs.swe.sandbox import ContainerGone, Limits
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.images import compose_message, ensure_task_image, image_workdir
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import FIXTURES, load_terminal_tasks


class TerminalConfig(EpisodeConfig):
    """The options of Terminal-v0 (and, with the agent's, TerminalAgent-v0). The container's cpus, memory,
    storage and network come from each task's task.toml, not from here."""

    dataset: str = FIXTURES
    """"fixtures" (the Harbor tasks shipped with gymenvs), a task folder or a folder of them, an archive
    (.tar.gz, .zip, ...), a dataset of task files (.jsonl/.parquet), or a Hub dataset (gymenvs/terminal/tasks.py)."""
    internet: bool = True
    """Give the agent's container the network when its task asks for it ([environment] allow_internet or
    network_mode "public", Harbor's default); False: never. An "allowlist" task gets none. Grading does not
    follow this: the tests get the network of the task's [verifier] (else [environment]) network mode, since
    test.sh often installs its own tools (docs/terminal.md)."""
    verifier_timeout_s: PositiveFloat | None = None
    """Seconds tests/test.sh may run (default: the task's [verifier] timeout_sec)."""


@dataclass
class TerminalReport:
    """The grade of one episode: `grade_task`'s result, read the way the SWE envs read a grade."""

    task: str
    result: VerifierResult

    @property
    def reward(self) -> float:
        return self.result.reward or 0.0

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def reason(self) -> str:
        return self.result.reason

    @property
    def status(self) -> str:
        return self.result.reason

    @property
    def resolved(self) -> bool:
        return self.result.reason == "solved"

    @property
    def error(self) -> str | None:
        return None if self.result.outcome == EndedBy.MODEL else self.result.detail or None

    def summary(self) -> str:
        scores = ", ".join(f"{name} {value:g}" for name, value in self.result.scores.items() if name != "reward")
        return (f"The task's tests ran: reward {self.reward:g} ({self.reason})" + (f"; scores: {scores}" if scores else "")
                + (f". {self.result.detail}" if self.error else "."))

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, **self.result.to_dict()}


class TerminalTasks:
    """Mixed in before an SWE env (`class TerminalEnv(TerminalTasks, SWEEnv)`): Harbor tasks as its tasks."""

    config_class: ClassVar[type[EpisodeConfig]] = TerminalConfig
    #: A task is picked by its name: `reset(options={"task": name})`, or "instance_id" as in the SWE envs.
    reset_option_keys: ClassVar[frozenset[str]] = frozenset({"instance_id", "task"})
    # Set by the SWE env this is mixed into.
    config: Any
    client: Any
    episode_task: Any
    episode_sandbox: Any
    report: Any
    workdir: str
    shell_setup: str
    _release: Any

    def _load_tasks(self) -> tuple[tuple[TerminalTask, ...], dict[str, str]]:
        tasks = select_tasks(load_terminal_tasks(self.config.dataset, split=self.config.split), self.config.instance_ids)
        refused = {task.name: compose_message(task) for task in tasks if task.environment_kind == "compose"}
        if len(refused) == len(tasks):
            raise ValueError(f"dataset={self.config.dataset!r}: no task gymenvs can run: {refused}")
        return tasks, refused

    def _find_task(self, options: dict[str, Any]) -> TerminalTask:
        if "task" in options:
            if "instance_id" in options and options["instance_id"] != options["task"]:
                raise ResetOptionsError(f"reset(options=...): task={options['task']!r} and "
                                        f"instance_id={options['instance_id']!r} name different tasks: give one")
            options = {**options, "instance_id": options["task"]}
        return super()._find_task(options)  # type: ignore[misc]

    def _refused_as(self) -> str:
        return "cannot run here"

    def _limits_for(self, task: TerminalTask | None) -> Limits:
        if task is None:
            return Limits(pids_limit=self.config.pids_limit)
        environment = task.config.environment
        if environment.gpus:
            raise ValueError(f"task {task.name!r} asks for {environment.gpus} GPU(s): gymenvs gives containers none")
        network = self.config.internet and task.config.agent_network_mode == "public"
        return Limits(mem_limit=f"{environment.memory_mb}m", cpus=environment.cpus, pids_limit=self.config.pids_limit,
                      network=network, disk_limit=environment.storage_mb << 20)

    def task_image(self) -> str:
        """The episode task's image (built from environment/ on first use); its WORKDIR becomes the episode's."""
        image = ensure_task_image(self.client, self.episode_task, pull=self.config.pull)
        self.workdir = image_workdir(self.client, image)
        self.shell_setup = f"cd {shlex.quote(self.workdir)}"
        return image

    def task_text(self) -> str:
        return self.episode_task.instruction

    def task_environment(self) -> dict[str, str]:
        return {"GYMENVS_TASK_STYLE": "terminal"}

    def _grade_and_end(self, ended: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
        """Grade the episode's container with the task's tests (`grade_task`, which stops everything in it),
        then remove it; the report and the info keys it fills (report, status, scores, who ended the episode)."""
        task, sandbox = self.episode_task, self.episode_sandbox
        try:
            sandbox.ensure_running()
        except ContainerGone as exc:
            self._release()
            dead = VerifierResult(None, outcome=EndedBy.INFRA, reason=exc.reason, detail=f"the agent's container died: {exc}")
            self.report = TerminalReport(task.name, dead)
            return self.report, {"report": self.report.to_dict(), "status": exc.reason, "scores": {}, **sandbox_ending(exc)}
        try:
            result = grade_task(sandbox, task, timeout_s=self.config.verifier_timeout_s)
        finally:
            self._release()
        self.report = TerminalReport(task.name, result)
        return self.report, {"report": self.report.to_dict(), "status": result.reason, "scores": dict(result.scores),
                             **grade_ending(self.report, ended)}
