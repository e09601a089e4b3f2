"""What SWE-v0 and SWEAgent-v0 share: one validated config, one task picker, one way to grade and end.

`SWEConfig` holds every option of the tasks, the container limits and grading; both envs take one
(`config=`) or its fields as keyword arguments. `SWEBaseEnv` picks the episode's task, owns the
sandbox the episode runs in, and grades what changed in that very container (`grade_sandbox`: the
engine reads the changes, a fresh container from the task image runs the tests). SWE-v0 adds its
tools (gymenvs/swe/env.py); SWEAgent-v0 its agent harness (gymenvs/swe/agents/env.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Annotated, Any, ClassVar, Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, field_validator

from gymenvs.core import EndedBy, Outcome, TextEnv, ending
from gymenvs.core.config import keyword_names
from gymenvs.core.errors import ResetOptionsError, config_error, did_you_mean, short_repr
from gymenvs.core.outcomes import DETAIL_KEY, OUTCOME_KEY, REASON_KEY
from gymenvs.swe.grading import TEST_USER, GradeReport, grade_sandbox
from gymenvs.swe.sandbox import (
    SIZE_PATTERN,
    ContainerGone,
    DiskLimitExceeded,
    Limits,
    Sandbox,
    SandboxError,
    WarmPool,
    parse_size,
    reap_orphans_once,
    shared_client,
)
from gymenvs.swe.sandbox.images import ENV_SETUP, WORKDIR, check_template, image_for
from gymenvs.swe.tasks import FIXTURES, Task, load_tasks
from gymenvs.swe.tasks.validate import invalid_tasks

#: Docker's size syntax, for every size option: a number of bytes with an optional unit ("512m", "10g").
Size = Annotated[str, Field(pattern=SIZE_PATTERN)]

class _HasId(Protocol):
    @property
    def instance_id(self) -> str: ...


TaskT = TypeVar("TaskT", bound=_HasId)


class EpisodeConfig(BaseModel):
    """The options every sandboxed env shares (SWE-v0, SWEAgent-v0, Terminal-v0, TerminalAgent-v0): which
    tasks, the container's process limit, the shell and the warm pool. A bad value is a `ValueError`
    (pydantic's `ValidationError`) naming the option, the value and what is allowed; so is an unknown option."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, use_attribute_docstrings=True)

    dataset: str = FIXTURES
    """"fixtures" (the tasks shipped with gymenvs), or where the tasks are (each env says which forms it reads)."""
    split: str | None = None
    """The dataset split (default: the only one, or "test")."""
    instance_ids: tuple[str, ...] | None = None
    """Restrict the episodes to these tasks (each must be in the dataset)."""
    pull: bool = False
    """Pull a missing image from its registry (default: no; a missing image fails at reset, saying how to
    build or pull it)."""
    pids_limit: PositiveInt = 512
    """Processes allowed in each container."""
    output_limit: Annotated[int, Field(ge=256, le=1 << 20)] = 10_000
    """Bytes of a command's output shown to the agent (its head and tail)."""
    warm_pool: Annotated[int, Field(ge=0, le=256)] = 0
    """Containers kept started ahead of time per image (0: none), so that `reset` does not wait for
    `docker run`; each serves one episode only. SWEAgent-v0's have each their own channel directory
    (see docs/swe-warm-pool.md)."""
    command_timeout_s: PositiveFloat = 60.0
    """Seconds one bash command may run before it is stopped."""

    @field_validator("instance_ids", mode="before")
    @classmethod
    def _ids_as_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @classmethod
    def from_kwargs(cls, config: EpisodeConfig | None = None, /, **options: Any) -> Self:
        """`config`'s options (default: all defaults) with `options` over them."""
        given = {name: getattr(config, name) for name in config.model_fields_set} if config is not None else {}
        return cls.model_validate({**given, **options})


class SWEConfig(EpisodeConfig):
    """The options SWE-v0 and SWEAgent-v0 share: `EpisodeConfig`'s, the image names, the container
    limits and grading. A bad value is a `ValueError` naming the option, the value and what is allowed."""

    image_template: str | None = None
    """Image name for rows without an `image`, with the fields {instance_id}, {swebench_id}, {swegym_id},
    {repo}, {version} (default: the SWE-Gym / SWE-bench convention)."""
    validation_report: str | None = None
    """A `gymenvs swe validate` report (JSONL): the tasks it marks invalid are never drawn, and naming
    one in `reset(options={"instance_id": ...})` is a ValueError saying which rule it broke."""

    # -- limits of each container -------------------------------------------------------------------
    mem_limit: Size = "2g"
    """Memory of each container (docker size syntax, e.g. "2g")."""
    cpus: PositiveFloat = 1.0
    """CPUs of each container."""
    disk_limit: Size = "10g"
    """Bytes the agent's container may write (docker size syntax, e.g. "10g"); the episode is stopped beyond it."""
    network: bool = False
    """Give the agent's container network access (grading never has any)."""

    # -- timeouts and grading -------------------------------------------------------------------------
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
    def limits(self) -> Limits:
        """The limits of the agent's container."""
        return Limits(mem_limit=self.mem_limit, cpus=self.cpus, pids_limit=self.pids_limit, network=self.network,
                      disk_limit=parse_size(self.disk_limit))

    @property
    def test_user(self) -> str | None:
        """Who runs the tests when grading: an unprivileged uid:gid, or None for root."""
        return None if self.grade_as_root else TEST_USER


#: The `outcome_reason` of each grading status (`GradeReport.status`) that is not its own name.
def sandbox_ending(exc: SandboxError) -> dict[str, str]:
    """The `info` entries of an episode a sandbox failure ended: infra, with the error's reason
    ("container_died", "oom_killed", "disk_limit", "image_missing", "engine_error")."""
    return ending(EndedBy.INFRA, exc.reason, str(exc))


def grade_ending(report: GradeReport, ended: dict[str, str] | None = None) -> dict[str, str]:
    """Who ended an episode whose changes were graded into `report`, when the episode itself ended as
    `ended` (None: the agent submitted). An infra end stays infra; grading that could not give a
    verdict is infra or invalid; otherwise the model's, "solved" if resolved, else the episode's own
    reason (the turn limit, ...) or the grading status ("failed", "patch_failed", "tampered", "screened")."""
    if ended is not None and ended[OUTCOME_KEY] != EndedBy.MODEL:
        return ended
    if report.outcome != EndedBy.MODEL:
        return ending(report.outcome, report.reason, report.error or "")
    if ended is not None and not report.resolved:
        return ending(EndedBy.MODEL, ended[REASON_KEY], f"{ended[DETAIL_KEY]} (graded: {report.status})".strip())
    return ending(EndedBy.MODEL, report.reason, report.error or "")


def select_tasks(tasks: tuple[TaskT, ...], instance_ids: Sequence[str] | None) -> tuple[TaskT, ...]:
    """`tasks`, restricted to `instance_ids` (in their order) when given; each id must be in `tasks`."""
    if instance_ids is None:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    unknown = [i for i in instance_ids if i not in by_id]
    if unknown or not instance_ids:
        raise ValueError(f"instance_ids={list(instance_ids)!r}: {unknown or 'empty'} not in the dataset")
    return tuple(by_id[i] for i in instance_ids)


def refused_tasks(tasks: tuple[Task, ...], validation_report: str | None) -> dict[str, str]:
    """{instance_id: why} of the tasks `validation_report` marks invalid; ValueError if that leaves none."""
    if validation_report is None:
        return {}
    refused = {i: why for i, why in invalid_tasks(validation_report).items() if i in {t.instance_id for t in tasks}}
    if len(refused) == len(tasks):
        raise ValueError(f"validation_report={validation_report!r} marks every task of this env invalid: {refused}")
    return refused


class SWEBaseEnv(TextEnv):
    """The part of SWE-v0 and SWEAgent-v0 that is the same: the config, the task of the episode, the
    container it runs in (`_sandbox`), and grading that container's changes to end the episode.

    Subclasses implement `_start_episode` (calling `pick_task`), their actions, and `_release`
    (stop what runs in the container and forget it; `_grade_and_end` removes the container itself).
    """

    reset_option_keys = frozenset({"instance_id"})
    config_class: ClassVar[type[EpisodeConfig]] = SWEConfig
    #: Where the agent works in the container, and the shell lines that put a command there (an env whose
    #: tasks each have their own may set them per episode).
    workdir: str = WORKDIR
    shell_setup: str = ENV_SETUP

    def __init__(self, config: EpisodeConfig | None = None, *, max_turns: PositiveInt | None = None,
                 render_mode: str | None = None, **options: Any):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        if config is not None and not isinstance(config, EpisodeConfig):
            raise ValueError(f"config={config!r}: allowed is a {self.config_class.__qualname__} or None")
        try:
            self.config: Any = self.config_class.from_kwargs(config, **options)
        except ValidationError as exc:
            raise config_error(type(self).__name__, exc, keyword_names(type(self)) or ()) from None
        self.tasks, self.refused = self._load_tasks()
        self.tasks = tuple(task for task in self.tasks if task.instance_id not in self.refused)
        self.limits = self._limits_for(None)
        self.task: Any = None
        self.report: Any = None
        self._sandbox: Sandbox | None = None
        self._pools: list[WarmPool] = []  # the warm pools this env has joined
        self._removals: list[Future] = []  # containers of ended episodes still being removed in the background

    def _release_containers(self) -> None:
        """At close: wait for the background removals of ended episodes' containers, and leave the pools."""
        for removal in self._removals:
            removal.result()
        self._removals.clear()
        for pool in self._pools:
            pool.leave()
        self._pools.clear()

    # -- what a family of tasks decides (SWE here; Terminal-v0 overrides them) --------------------

    def _load_tasks(self) -> tuple[tuple[Any, ...], dict[str, str]]:
        """The env's tasks (each with an `instance_id`), and {instance_id: why} of those never to draw."""
        tasks = select_tasks(load_tasks(self.config.dataset, split=self.config.split), self.config.instance_ids)
        return tasks, refused_tasks(tasks, self.config.validation_report)

    def _limits_for(self, task: Any) -> Limits:
        """The limits of the container of `task` (None: before any episode)."""
        return self.config.limits

    def task_environment(self) -> dict[str, str]:
        """Environment variables an agent program gets about the kind of task (the reference agent's
        GYMENVS_TASK_STYLE); none for SWE tasks."""
        return {}

    def _refused_as(self) -> str:
        """Why the tasks in `self.refused` are never drawn, as words after "instance_id=...": its reason follows."""
        return f"is marked invalid by validation_report={self.config.validation_report!r}"

    def task_text(self) -> str:
        """The episode task's statement, as an agent program reads it from its task file."""
        return self.episode_task.problem_statement

    @property
    def client(self) -> Any:
        """The process's docker client, created at the first reset (constructing an env touches no engine)."""
        return shared_client()

    @property
    def reaped(self) -> list[str]:
        """Containers of dead processes this process removed at its first reset (it reaps once)."""
        return reap_orphans_once(self.client)

    @property
    def episode_task(self) -> Any:
        """The task of the current (or last) episode."""
        if self.task is None:
            raise RuntimeError("no episode has started: call reset()")
        return self.task

    @property
    def episode_sandbox(self) -> Sandbox:
        """The container the current episode runs in."""
        if self._sandbox is None:
            raise RuntimeError("the episode has no container: it has ended, or none started")
        return self._sandbox

    def pick_task(self, options: dict[str, Any]) -> Any:
        """The task `options["instance_id"]` names, else one drawn with the episode's seed; its limits become
        the episode's (`self.limits`)."""
        task = self._find_task(options)
        self.limits = self._limits_for(task)
        return task

    def _find_task(self, options: dict[str, Any]) -> Any:
        if "instance_id" not in options:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        for task in self.tasks:
            if task.instance_id == options["instance_id"]:
                return task
        if not isinstance(options["instance_id"], str):
            raise ResetOptionsError(f"reset option instance_id={short_repr(options['instance_id'])}: expected a str, "
                                    f"the instance_id of a task of this env ({len(self.tasks)} tasks)")
        if options["instance_id"] in self.refused:
            name = options["instance_id"]
            raise ResetOptionsError(f"instance_id={name!r} {self._refused_as()}: {self.refused[name]}")
        known = ", ".join(t.instance_id for t in self.tasks[:5]) + (", ..." if len(self.tasks) > 5 else "")
        close = did_you_mean(str(options["instance_id"]), [task.instance_id for task in self.tasks])
        raise ResetOptionsError(f"instance_id={options['instance_id']!r} is not a task of this env{close} "
                                f"({len(self.tasks)} tasks: {known})")

    def task_image(self) -> str:
        """The image of the episode's task (the agent may run in an image derived from it)."""
        return image_for(self.episode_task, self.config.image_template)

    def _grade_and_end(self, ended: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
        """Freeze the episode's container, grade what changed in it in a fresh container from the task
        image, then release it; the report and the info keys it fills (report, status, patch, and who
        ended the episode: `grade_ending` of `ended`, how the episode itself ended, None if by submitting).
        A container that died or outgrew its disk limit before it is graded is not graded: its episode ended by infra."""
        sandbox = self.episode_sandbox
        try:
            sandbox.ensure_running()
            if ended is None or ended[OUTCOME_KEY] == EndedBy.MODEL:  # an infra end (the disk limit too) is graded as it is
                sandbox.check_disk(force=True)  # a file written past the limit by the last command, just before submit
        except (ContainerGone, DiskLimitExceeded) as exc:
            self._release()
            what = "died" if isinstance(exc, ContainerGone) else "outgrew its disk limit"
            self.report = GradeReport(self.episode_task.instance_id, "error", error=f"the agent's container {what}: {exc}")
            return self.report, {"report": self.report.to_dict(), "status": "error", "patch": "", **sandbox_ending(exc)}
        try:
            sandbox.client.api.pause(sandbox.id)  # nothing left running in it changes its files now
        except Exception:  # already gone: grading reports what it can read
            pass
        try:
            self.report, diff = grade_sandbox(self.client, self.episode_task, sandbox, image=self.task_image(),
                                              timeout=self.config.grading_timeout_s, test_user=self.config.test_user,
                                              screen=self.config.screen,
                                              limits=dataclasses.replace(self.limits, network=False),
                                              episode_id=self._episode_id or "")
        finally:
            self._release()
        return self.report, {"report": self.report.to_dict(), "status": self.report.status, "patch": diff,
                             **grade_ending(self.report, ended)}

    def _release(self) -> None:
        """Stop what runs in the episode's container and remove it (or hand it to be removed)."""
        raise NotImplementedError

    def _at_turn_limit(self, outcome: Outcome) -> Outcome:
        """Grade at the turn limit: the episode is truncated, its reward is the grade."""
        ended = self._end_at_turn_limit()
        ended.observation = outcome.observation + "\n" + ended.observation
        ended.info = {**outcome.info, **ended.info}
        ended.terminated = False  # the turn limit truncates the episode; the reward is the grade
        return ended

    def _end_at_turn_limit(self) -> Outcome:
        raise NotImplementedError

    def _episode_state(self) -> dict[str, Any]:
        return {
            "instance_id": self.task.instance_id if self.task else None,
            "container": self._sandbox.name if self._sandbox else None,
            "status": self.report.status if self.report else None,
        }
