"""A task family: where a container env's tasks come from, what each runs in, and how it is graded.

The container envs (`ToolsEnv`, `AgentEnv`) run any family; a family is an object handed to them, not a
subclass. SWE-bench rows (`gymenvs.swe.family.SWEFamily`) and Harbor task folders
(`gymenvs.terminal.family.HarborFamily`) are two; docs/writing-task-families.md shows how to write a
third in one module. A family answers:

- `load_tasks()`: its tasks (each has an `instance_id`), from `options.dataset` and `options.split`;
- `limits(task)`: the resources of the task's container;
- `image(task, runtime, pull=...)`: the task's image, made present, with its working directory and the
  shell lines that put a command in the task's environment;
- `instruction(task)`: what the task asks, as an agent program reads it (and `prompt`, the first
  observation of an env that acts through tools);
- `grade(run)`: the `Grade` of the episode's container, where the agent cannot reach;
- optionally `start_sidecars(task, runtime, ...)`: the containers a task runs beside the agent's (a compose
  project's other services), on a private network the agent's container joins;
- optionally, for a task of several steps (instructions given and graded in turn, in one episode):
  `step_count(task)`, `at_step(task, i)` (the task as step i runs and is graded), `prepare_step` (before the
  agent acts), `goes_on` (whether the steps after a grade run) and `combine` (the episode's grade);
- optionally, for `gymenvs tasks validate`: `validate(task, runtime, runs=...)` (the task checked before
  training on it), `fingerprint(task)` (what decides its verdict) and `write_tasks(tasks, path)` (a
  dataset of the valid ones); for `gymenvs tasks regrade`: `regrade(task, stored, runtime)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from gymenvs.container.runtime import Limits, Runtime, Sandbox, Sidecars
from gymenvs.core.errors import config_error
from gymenvs.core.outcomes import EndedBy, ending

if TYPE_CHECKING:
    from gymenvs.container.validation import TaskValidation

FIXTURES = "fixtures"


class Task(Protocol):
    """What the platform asks of a task: its id. A family's own task type holds the rest."""

    @property
    def instance_id(self) -> str: ...


TaskT = TypeVar("TaskT", bound=Task)


@dataclass(frozen=True)
class TaskImage:
    """The image a task runs in, present on the runtime, with where the agent works in it."""

    name: str
    workdir: str
    #: Shell lines that put a command in the task's environment (the working directory, an activated venv).
    setup: str = ""


class GradingAhead(ABC):
    """What a family made ready for grading while the episode ran (`TaskFamily.grade_ahead`)."""

    @abstractmethod
    def discard(self) -> None:
        """Release it unused: the episode ended without being graded."""


@dataclass
class GradingRun(Generic[TaskT]):
    """What a family grades: the episode's container (frozen: nothing in it runs), its task and image, the
    limits it ran under, and the runtime to start grading containers on. A family that is done with the
    container before its tests end calls `done_with_sandbox()` (once, and uses the container no more): the env
    then removes it while the tests run, instead of after. `ahead` is what the family's `grade_ahead` made
    ready during the episode (None if nothing, or if making it failed); `grade` owns it from then on."""

    runtime: Runtime
    sandbox: Sandbox
    task: TaskT
    image: TaskImage
    limits: Limits
    episode_id: str
    done_with_sandbox: Callable[[], None] = lambda: None
    ahead: GradingAhead | None = None


@dataclass
class Grade:
    """The verdict on one episode, whatever the family.

    `outcome` is whose result it is (`gymenvs.core.outcomes.EndedBy`: "model", "infra", "invalid") and
    `reason` a stable name ("solved", "failed", "grading_timeout"...); `reward` counts only for the model.
    `status` is the family's own word for the result, `report` its whole report (`info["report"]`),
    `info` more keys of the last step's info (the SWE diff as "patch", Harbor's named "scores"), and
    `summary` what the agent reads at the end."""

    reward: float
    outcome: str
    reason: str
    detail: str = ""
    status: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    summary: str = ""

    @classmethod
    def infra(cls, reason: str, detail: str, *, status: str = "error") -> Grade:
        """No verdict: grading could not give one for a reason outside the task and the agent."""
        return cls(0.0, EndedBy.INFRA, reason, detail, status, {"status": status, "error": detail},
                   summary=f"Grading could not run: {detail}")

    @property
    def resolved(self) -> bool:
        return self.outcome == EndedBy.MODEL and self.reason == "solved"

    def ending(self) -> dict[str, str]:
        """The `info` entries saying who ended the episode (`gymenvs.core.outcomes`)."""
        return ending(self.outcome, self.reason, self.detail)


class FamilyOptions(BaseModel):
    """The options every family takes: which tasks. A family adds its own by subclassing (`TaskFamily.Options`).
    A bad value or an unknown option is a `ConfigError` (a `ValueError`) naming it, at construction."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True)

    dataset: str = FIXTURES
    """"fixtures" (the tasks shipped with gymenvs), or where the tasks are (each family says which forms it reads)."""
    split: str | None = None
    """The dataset split (default: the only one, or "test")."""
    instance_ids: tuple[str, ...] | None = None
    """Restrict the episodes to these tasks (each must be in the dataset)."""
    validation_report: str | None = None
    """A `gymenvs tasks validate` report (JSONL): the tasks it marks invalid are never drawn, and naming one
    in `reset(options={"instance_id": ...})` is a ValueError saying which rule it broke."""

    @field_validator("instance_ids", mode="before")
    @classmethod
    def _ids_as_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


OptionsT = TypeVar("OptionsT", bound=FamilyOptions)


class TaskFamily(ABC, Generic[TaskT, OptionsT]):
    """The base of a task family (see the module docstring). `TaskFamily(**options)` validates its options."""

    #: What errors and `info` call it.
    name: ClassVar[str]
    Options: ClassVar[type[FamilyOptions]] = FamilyOptions
    #: `reset(options=...)` keys besides "instance_id" that name a task the same way (Harbor: "task").
    task_option_names: ClassVar[frozenset[str]] = frozenset()
    #: Environment variables an agent program gets about the kind of task.
    agent_environment: ClassVar[Mapping[str, str]] = {}
    #: Where `gymenvs tasks validate` writes the valid tasks by default (`write_tasks`).
    valid_tasks_file: ClassVar[str] = "valid_tasks.txt"
    #: Whether the env pauses the episode's container before `grade` (nothing in it runs while it is read); a
    #: family whose grading must look at the running processes first, and then stops them itself, says False.
    pause_before_grading: ClassVar[bool] = True

    def __init__(self, **options: Any):
        try:
            self.options: OptionsT = self.Options(**options)  # type: ignore[assignment]  # the subclass's Options
        except ValidationError as exc:
            raise config_error(type(self).__name__, exc, self.Options.model_fields) from None

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return frozenset(cls.Options.model_fields)

    # -- what a family answers ----------------------------------------------------------------

    @abstractmethod
    def load_tasks(self) -> Sequence[TaskT]:
        """Every task of `options.dataset` (and `options.split`); a `ValueError` saying why when there are none."""

    @abstractmethod
    def limits(self, task: TaskT) -> Limits:
        """The resources of the task's container."""

    @abstractmethod
    def image(self, task: TaskT, runtime: Runtime, *, pull: bool = False, registry: str | None = None) -> TaskImage:
        """The task's image, present on `runtime` (pulled from `registry` if given, else built, or pulled from its own
        registry when `pull`), with its working directory."""

    @abstractmethod
    def instruction(self, task: TaskT) -> str:
        """What the task asks, as an agent program reads it from its task file."""

    @abstractmethod
    def grade(self, run: GradingRun[TaskT]) -> Grade:
        """Grade the episode's container where the agent cannot reach; infrastructure failures are an infra
        `Grade`, never an exception."""

    def prompt(self, task: TaskT, *, workdir: str, tools: str) -> str:
        """The first observation of an env that acts through tools: the instruction, where the work happens,
        the tools (`tools`, written by the env) and how the work is graded."""
        return (f"{self.instruction(task).strip()}\n\nYou work in a Linux container, in {workdir}. {tools} "
                "The task's tests, which you do not see, then check the state you left in the container.")

    def grade_ahead(self, task: TaskT, runtime: Runtime, *, image: TaskImage, limits: Limits, episode_id: str,
                    sandbox: Sandbox) -> GradingAhead | None:
        """Make ready, while the agent works in `sandbox`, what grading `task` needs and the agent's work cannot change
        (a fresh grading container, say); None (the default) for nothing. The env calls it in the background from the
        episode's first step and hands the result to `grade` as `run.ahead`, or discards it if the episode ends
        ungraded."""
        return None

    def start_sidecars(self, task: TaskT, runtime: Runtime, *, episode_id: str, limits: Limits,
                       pull: bool = False, registry: str | None = None) -> Sidecars | None:
        """Start the containers `task` runs beside the agent's, with the reach `limits.network` allows; None (the
        default) for a task with none. The env removes them after grading."""
        return None

    def requirements(self, task: TaskT) -> frozenset[str]:
        """What `task` needs of a runtime beyond sandboxes and images (`gymenvs.container.runtime.requirements`):
        none by default. A container env refuses, at construction, the tasks needing what its runtime lacks."""
        return frozenset()

    # -- tasks of several steps ---------------------------------------------------------------

    def step_count(self, task: TaskT) -> int:
        """How many steps `task` has (1, the default: one instruction, graded once)."""
        return 1

    def at_step(self, task: TaskT, index: int) -> TaskT:
        """The task as its step `index` runs and is graded (its instruction, its tests...)."""
        return task

    def prepare_step(self, task: TaskT, sandbox: Sandbox) -> None:
        """Ready the step's container before the agent acts in it (`task` is `at_step`'s view)."""

    def goes_on(self, task: TaskT, grade: Grade) -> bool:
        """Whether the steps after this one run, given its grade (default: when it is a verdict on the agent)."""
        return grade.outcome == EndedBy.MODEL

    def combine(self, task: TaskT, grades: Sequence[Grade]) -> Grade:
        """The episode's grade from its steps' grades, in order (default: the last)."""
        return grades[-1]

    def agent_timeout_s(self, task: TaskT) -> float | None:
        """Seconds an agent program may take on the task (None: the env's own limit)."""
        return None

    def refused(self, tasks: Sequence[TaskT]) -> dict[str, str]:
        """{instance_id: why} of the tasks never to draw: by default those `options.validation_report` marks invalid."""
        if self.options.validation_report is None:
            return {}
        from gymenvs.container.validation import invalid_tasks

        ids = {task.instance_id for task in tasks}
        report = self.options.validation_report
        return {i: f"validation_report={report!r} marks it {why}" for i, why in invalid_tasks(report).items() if i in ids}

    # -- validation ---------------------------------------------------------------------------

    def validate(self, task: TaskT, runtime: Runtime, *, runs: int = 1, timeout_s: float | None = None) -> TaskValidation:
        """`task` run and graded with its reference solution and with none, `runs` times each, and judged."""
        raise NotImplementedError(f"the {self.name} family has no validation")

    def regrade(self, task: TaskT, stored: Mapping[str, Any], runtime: Runtime) -> Grade:
        """Grade again, with the current grader and task, what an episode of `task` left, from what its trajectory
        stored (`extra["gymenvs"]`: `gymenvs.container.regrading`); `ValueError` if that is not enough."""
        raise ValueError(f"the {self.name} family cannot re-grade stored episodes")

    def fingerprint(self, task: TaskT) -> str:
        """A digest of what decides the task's verdict: validation judges a task again once it changes."""
        raise NotImplementedError(f"the {self.name} family has no validation")

    def write_tasks(self, tasks: Sequence[TaskT], path: str | Path) -> int:
        """Write `tasks` where `options.dataset` can name them again; how many."""
        raise NotImplementedError(f"the {self.name} family cannot write its tasks")

    # -- what the envs ask --------------------------------------------------------------------

    def episode_tasks(self) -> tuple[tuple[TaskT, ...], dict[str, str]]:
        """The tasks episodes draw from (restricted to `options.instance_ids`, without the refused ones) and
        {instance_id: why} of the refused ones; a `ValueError` if none is left."""
        tasks = select_tasks(tuple(self.load_tasks()), self.options.instance_ids)
        refused = self.refused(tasks)
        drawn = tuple(task for task in tasks if task.instance_id not in refused)
        if not drawn:
            raise ValueError(f"dataset={self.options.dataset!r}: no task can run: {refused}")
        return drawn, refused

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={getattr(self.options, name)!r}" for name in sorted(self.options.model_fields_set))
        return f"{type(self).__name__}({given})"


def select_tasks(tasks: tuple[TaskT, ...], instance_ids: Sequence[str] | None) -> tuple[TaskT, ...]:
    """`tasks`, restricted to `instance_ids` (in their order) when given; each id must be in `tasks`."""
    if instance_ids is None:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    unknown = [i for i in instance_ids if i not in by_id]
    if unknown or not instance_ids:
        raise ValueError(f"instance_ids={list(instance_ids)!r}: {unknown or 'empty'} not in the dataset")
    return tuple(by_id[i] for i in instance_ids)

