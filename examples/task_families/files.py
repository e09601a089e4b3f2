"""A task family in one module: each task asks for a file with a given content somewhere in the container.

It is the smallest family that runs on gymenvs' container platform with both ways of acting:

    from gymenvs.container.tools_env import ToolsEnv      # the policy acts through bash and file tools
    from gymenvs.container.agent.env import AgentEnv      # an agent program acts; its LLM calls are the steps

    env = ToolsEnv(family=FileTasks())                    # or family="files:FileTasks", built from keywords
    env = AgentEnv(family=FileTasks(), agent="reference")

or registered under an id of your own:

    gymnasium.register("files/Files-v0", entry_point="gymenvs.container.tools_env:ToolsEnv",
                       kwargs={"family": "files:FileTasks"})

docs/writing-task-families.md walks through it; tests/container/test_families.py runs it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gymenvs.container.family import FamilyOptions, Grade, GradingRun, TaskFamily, TaskImage
from gymenvs.container.images import BASE_IMAGE, ensure_image
from gymenvs.container.runtime import Limits, Runtime, SandboxError
from gymenvs.core.outcomes import EndedBy


@dataclass(frozen=True)
class FileTask:
    instance_id: str
    path: str
    content: str


#: The tasks of `dataset="builtin"`.
BUILTIN = (
    FileTask("greeting", "/root/greeting.txt", "hello, world"),
    FileTask("config", "/etc/app/mode", "production"),
    FileTask("answer", "/root/answer.txt", "42"),
)


class FileOptions(FamilyOptions):
    """`FamilyOptions`' (which tasks) and the image the tasks run in."""

    dataset: str = "builtin"
    """"builtin" (three tasks), or a JSONL file of {"instance_id", "path", "content"} rows."""
    image: str = BASE_IMAGE
    """The image every task runs in."""


class FileTasks(TaskFamily[FileTask, FileOptions]):
    """Reward 1 when the file holds exactly the content asked for, read by the runtime from the agent's container,
    which is frozen while it is graded (no program of it runs)."""

    name = "files"
    Options = FileOptions

    def load_tasks(self) -> Sequence[FileTask]:
        if self.options.dataset == "builtin":
            return BUILTIN
        rows = Path(self.options.dataset).read_text().splitlines()
        return tuple(FileTask(**json.loads(row)) for row in rows if row.strip())

    def limits(self, task: FileTask) -> Limits:
        return Limits(mem_limit="256m", cpus=0.5, disk_limit=64 << 20)

    def image(self, task: FileTask, runtime: Runtime, *, pull: bool = False, registry: str | None = None) -> TaskImage:
        ensure_image(runtime, self.options.image, pull=pull, registry=registry)
        return TaskImage(self.options.image, workdir="/root", setup="cd /root")

    def instruction(self, task: FileTask) -> str:
        return f"Create the file {task.path} holding exactly the text {task.content!r}, with no newline at the end."

    def grade(self, run: GradingRun[FileTask]) -> Grade:
        try:
            found = run.sandbox.fetch(run.task.path)
        except SandboxError as exc:
            return Grade.infra("grading_error", f"the file could not be read: {exc}")
        if found is None or not found[0].isfile():
            return _failed(f"{run.task.path} is missing or is not a regular file")
        content = found[1].decode("utf-8", "replace")
        if content != run.task.content:
            return _failed(f"{run.task.path} holds {content[:80]!r}, not {run.task.content!r}")
        return Grade(1.0, EndedBy.MODEL, "solved", status="solved", report={"content": content},
                     summary=f"{run.task.path} holds the right text: reward 1.")


def _failed(why: str) -> Grade:
    return Grade(0.0, EndedBy.MODEL, "failed", why, status="failed", report={"error": why}, summary=f"Reward 0: {why}.")
