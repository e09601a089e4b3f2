"""The Harbor task family: task folders in the Harbor format (Terminal-Bench 2 and its adapters), each with
its own image, limits, instruction and tests.

gymenvs/Terminal-v0 is `ToolsEnv(family=HarborFamily)` and gymenvs/TerminalAgent-v0 `AgentEnv(family=HarborFamily)`.
The task's image is built from its environment/, its container gets the cpus, memory, storage and
network of its task.toml, and grading runs its tests/test.sh where the agent cannot reach
(`gymenvs.terminal.grading.grade_task`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from pydantic import PositiveFloat

from gymenvs.container.family import FamilyOptions, Grade, GradingRun, TaskFamily, TaskImage
from gymenvs.container.runtime import Limits, Runtime
from gymenvs.container.validation import TaskValidation
from gymenvs.core.outcomes import EndedBy
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.images import compose_message, ensure_task_image
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import load_terminal_tasks


class HarborOptions(FamilyOptions):
    """The options of the Harbor family. A container's cpus, memory, storage and network come from each task's
    task.toml, not from here."""

    dataset: str = "fixtures"
    """"fixtures" (the Harbor tasks shipped with gymenvs), a task folder or a folder of them, an archive
    (.tar.gz, .zip, ...), a dataset of task files (.jsonl/.parquet), or a Hub dataset (gymenvs/terminal/tasks.py)."""
    internet: bool = True
    """Give the agent's container the network when its task asks for it ([environment] allow_internet or
    network_mode "public", Harbor's default); False: never. An "allowlist" task gets none. Grading does not
    follow this: the tests get the network of the task's [verifier] (else [environment]) network mode, since
    test.sh often installs its own tools (docs/terminal.md)."""
    verifier_timeout_s: PositiveFloat | None = None
    """Seconds tests/test.sh may run (default: the task's [verifier] timeout_sec)."""


class HarborFamily(TaskFamily[TerminalTask, HarborOptions]):
    """Harbor tasks: the reward is the task's tests' reward.txt, or reward.json's "reward" (its named scores in
    `info["scores"]`). `reset(options={"task": name})` (or "instance_id") picks a task by its name."""

    name = "harbor"
    Options = HarborOptions
    task_option_names = frozenset({"task"})
    agent_environment = {"GYMENVS_TASK_STYLE": "terminal"}

    def load_tasks(self) -> Sequence[TerminalTask]:
        return load_terminal_tasks(self.options.dataset, split=self.options.split)

    def refused(self, tasks: Sequence[TerminalTask]) -> dict[str, str]:
        compose = {task.name: compose_message(task) for task in tasks if task.environment_kind == "compose"}
        return {**super().refused(tasks), **compose}

    def limits(self, task: TerminalTask) -> Limits:
        environment = task.config.environment
        if environment.gpus:
            raise ValueError(f"task {task.name!r} asks for {environment.gpus} GPU(s): gymenvs gives containers none")
        network = self.options.internet and task.config.agent_network_mode == "public"
        return Limits(mem_limit=f"{environment.memory_mb}m", cpus=environment.cpus, network=network,
                      disk_limit=environment.storage_mb << 20)

    def image(self, task: TerminalTask, runtime: Runtime, *, pull: bool = False) -> TaskImage:
        """The task's image (built from environment/ on first use); its WORKDIR is where the agent works."""
        name = ensure_task_image(runtime, task, pull=pull)
        workdir = runtime.image_config(name).workdir
        return TaskImage(name, workdir, f"cd {shlex.quote(workdir)}")

    def instruction(self, task: TerminalTask) -> str:
        return task.instruction

    def agent_timeout_s(self, task: TerminalTask) -> float | None:
        return task.config.agent.timeout_sec

    def grade(self, run: GradingRun[TerminalTask]) -> Grade:
        """The task's tests on a snapshot of the episode's container (which this stops), in a fresh container."""
        return as_grade(run.task, grade_task(run.sandbox, run.task, timeout_s=self.options.verifier_timeout_s))

    def validate(self, task: TerminalTask, runtime: Runtime, *, runs: int = 1,
                 timeout_s: float | None = None) -> TaskValidation:
        """Run `runs` times empty and `runs` times with its oracle, each graded (`gymenvs.terminal.validate`)."""
        from gymenvs.terminal.validate import run_episode, validate_task

        return validate_task(task, lambda task, oracle: run_episode(runtime, task, oracle, timeout_s=timeout_s), runs)

    def fingerprint(self, task: TerminalTask) -> str:
        from gymenvs.terminal.validate import fingerprint

        return fingerprint(task)

    def write_tasks(self, tasks: Sequence[TerminalTask], path: str | Path) -> int:
        """The tasks' folders, one per line: a file `dataset=` reads."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("".join(f"{task.path.resolve()}\n" for task in tasks))
        return len(tasks)


def as_grade(task: TerminalTask, result: VerifierResult) -> Grade:
    """A verifier's result as the platform's `Grade`."""
    scores = ", ".join(f"{name} {value:g}" for name, value in result.scores.items() if name != "reward")
    verdict = result.outcome == EndedBy.MODEL
    summary = (f"The task's tests ran: reward {result.reward or 0.0:g} ({result.reason})"
               + (f"; scores: {scores}" if scores else "") + ("." if verdict else f". {result.detail}"))
    return Grade(result.reward or 0.0, result.outcome, result.reason, result.detail, result.reason,
                 {"task": task.name, **result.to_dict()}, {"scores": dict(result.scores)}, summary)
