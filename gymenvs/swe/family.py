"""The SWE-bench task family: dataset rows (SWE-bench, SWE-Gym, a local file, the shipped fixtures), each a
repository at a base commit with an issue to resolve, graded as the SWE-bench harness resolves an instance.

gymenvs/SWE-v0 is `ToolsEnv(family=SWEFamily)` and gymenvs/SWEAgent-v0 `AgentEnv(family=SWEFamily)`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import PositiveFloat, field_validator

from gymenvs.container.config import Size
from gymenvs.container.family import FamilyOptions, Grade, GradingRun, TaskFamily, TaskImage
from gymenvs.container.images import ensure_image
from gymenvs.container.runtime import Limits, Runtime, Sandbox, parse_size
from gymenvs.container.validation import TaskValidation
from gymenvs.swe.grading import TEST_USER, FreshGradingContainer, GradeReport, grade, grade_sandbox, start_grading_container
from gymenvs.swe.images import ENV_SETUP, WORKDIR, check_template, image_for
from gymenvs.swe.tasks import Task, load_tasks
from gymenvs.swe.tasks.tasks import task_to_row

_PROMPT = """You are working in the git repository {repo} at {workdir} (base commit {commit}). Resolve this issue:

<issue>
{problem}
</issue>

{tools} Your changes (the git diff against the base commit) are then graded by the repository's tests, which \
you do not see. Changes to test files, conftest.py files and pytest configuration are not applied when grading."""


class SWEOptions(FamilyOptions):
    """The options of the SWE family: `FamilyOptions`' (which tasks), the image names, the container limits
    and grading. A bad value is a `ValueError` naming the option, the value and what is allowed."""

    image_template: str | None = None
    """Image name for rows without an `image`, with the fields {instance_id}, {swebench_id}, {swegym_id},
    {repo}, {version} (default: the SWE-Gym / SWE-bench convention)."""

    # -- limits of each container -------------------------------------------------------------------
    mem_limit: Size = "2g"
    """Memory of each container (size syntax, e.g. "2g")."""
    cpus: PositiveFloat = 1.0
    """CPUs of each container."""
    disk_limit: Size = "10g"
    """Bytes the agent's container may write (size syntax, e.g. "10g"); the episode is stopped beyond it."""
    network: bool = False
    """Give the agent's container network access (grading never has any)."""

    # -- grading ----------------------------------------------------------------------------------------
    grading_timeout_s: PositiveFloat = 1800.0
    """Seconds the tests may run when grading."""
    grade_as_root: bool = False
    """Run the tests as root when grading (as SWE-bench does) instead of an unprivileged user; for
    repositories whose tests need root."""
    screen: Literal["flag", "zero"] = "zero"
    """What grading's static screen does with code in the agent's changes that targets the test run
    (docs/swe-security.md): "zero" (reward 0, status "screened") or "flag" (only `info["report"]["screen"]`)."""

    @field_validator("image_template")
    @classmethod
    def _known_fields(cls, value: str | None) -> str | None:
        return None if value is None else check_template(value)

    @property
    def test_user(self) -> str | None:
        """Who runs the tests when grading: an unprivileged uid:gid, or None for root."""
        return None if self.grade_as_root else TEST_USER


class SWEFamily(TaskFamily[Task, SWEOptions]):
    """SWE-bench rows: reward 1.0 when, after the episode, the task's FAIL_TO_PASS tests pass and its
    PASS_TO_PASS tests still pass, graded in a fresh container from the task image (`gymenvs.swe.grading`);
    the report holds every test's status, `info["patch"]` the graded diff."""

    name = "swe"
    Options = SWEOptions
    agent_environment = {"GYMENVS_TASK_STYLE": "repository"}
    valid_tasks_file = "valid_tasks.jsonl"

    def load_tasks(self) -> Sequence[Task]:
        return load_tasks(self.options.dataset, split=self.options.split)

    def limits(self, task: Task) -> Limits:
        options = self.options
        return Limits(mem_limit=options.mem_limit, cpus=options.cpus, network=options.network,
                      disk_limit=parse_size(options.disk_limit))

    def image(self, task: Task, runtime: Runtime, *, pull: bool = False, registry: str | None = None) -> TaskImage:
        name = image_for(task, self.options.image_template)
        hint = "build the fixture images with `gymenvs swe build-images`" if name.startswith("gymenvs/") else "pull or build it"
        ensure_image(runtime, name, pull=pull, registry=registry, hint=hint)
        return TaskImage(name, WORKDIR, ENV_SETUP)

    def instruction(self, task: Task) -> str:
        return task.problem_statement

    def prompt(self, task: Task, *, workdir: str, tools: str) -> str:
        return _PROMPT.format(repo=task.repo, workdir=workdir, commit=task.base_commit[:12],
                              problem=task.problem_statement.strip(), tools=tools)

    def grade_ahead(self, task: Task, runtime: Runtime, *, image: TaskImage, limits: Limits, episode_id: str,
                    sandbox: Sandbox) -> FreshGradingContainer:
        """The grading container, started while the agent works (about a third of grading's own time)."""
        return start_grading_container(runtime, image.name, limits=_no_network(limits),
                                       episode_id=episode_id or task.instance_id)

    def grade(self, run: GradingRun[Task]) -> Grade:
        """The agent's changes, read from outside its container, tested in a fresh container (no network)."""
        ahead = run.ahead if isinstance(run.ahead, FreshGradingContainer) else None
        report, diff = grade_sandbox(run.runtime, run.task, run.sandbox, image=run.image.name,
                                     timeout=self.options.grading_timeout_s, test_user=self.options.test_user,
                                     screen=self.options.screen, limits=_no_network(run.limits),
                                     episode_id=run.episode_id, done_reading=run.done_with_sandbox, ahead=ahead)
        return as_grade(report, diff)

    def validate(self, task: Task, runtime: Runtime, *, runs: int = 1, timeout_s: float | None = None) -> TaskValidation:
        """Graded `runs` times with the empty patch and with the gold patch (`gymenvs.swe.grading.validate`)."""
        from gymenvs.swe.grading.validate import validate_task

        def grade_one(task: Task, patch: str) -> GradeReport:
            return grade(runtime, task, patch, image=self.image(task, runtime).name,
                         timeout=timeout_s or self.options.grading_timeout_s, test_user=self.options.test_user,
                         screen=self.options.screen)

        return validate_task(task, grade_one, runs)

    def regrade(self, task: Task, stored: Mapping[str, Any], runtime: Runtime) -> Grade:
        """The stored diff (`info["patch"]`) graded again, as a prediction is."""
        patch = stored.get("patch")
        if patch is None:
            raise ValueError(f"{task.instance_id}: the episode stored no diff to grade")
        report = grade(runtime, task, patch, image=self.image(task, runtime).name, timeout=self.options.grading_timeout_s,
                       test_user=self.options.test_user, screen=self.options.screen)
        return as_grade(report, patch)

    def fingerprint(self, task: Task) -> str:
        from gymenvs.swe.grading.validate import fingerprint

        return fingerprint(task)

    def write_tasks(self, tasks: Sequence[Task], path: str | Path) -> int:
        """The tasks' rows, as a JSONL dataset `dataset=` reads."""
        rows = [task_to_row(task) for task in tasks]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("".join(json.dumps(row, default=str) + "\n" for row in rows))
        return len(rows)


def as_grade(report: GradeReport, diff: str = "") -> Grade:
    """A SWE grading report as the platform's `Grade`."""
    return Grade(report.reward, report.outcome, report.reason, report.error or "", report.status, report.to_dict(),
                 {"patch": diff}, report.summary())


def _no_network(limits: Limits) -> Limits:
    return dataclasses.replace(limits, network=False)
