"""`ContainerEnv`: one task of a family per episode, in its own container, graded where the agent cannot reach.

The base of the two ways of acting in a container: through tools (`ToolsEnv`: SWE-v0, Terminal-v0) and
through an agent program (`AgentEnv`: SWEAgent-v0, TerminalAgent-v0). It holds the task family (an
object: `gymenvs.container.family`), the runtime every engine operation goes through
(`gymenvs.container.runtime`), the episode's task and container, and grading that container to end the
episode. A subclass starts what acts in the container (`_begin`), and stops it (`_release`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, ClassVar, TypeVar

from pydantic import PositiveInt

from gymenvs.container.background import in_thread
from gymenvs.container.config import ContainerConfig, check_no_family_options, split_options
from gymenvs.container.family import Grade, GradingAhead, GradingRun, Task, TaskFamily, TaskImage
from gymenvs.container.pool import WarmPool, discard
from gymenvs.container.reaper import reap_once
from gymenvs.container.runtime import (
    RUNTIMES,
    ContainerGone,
    DiskLimitExceeded,
    Limits,
    Runtime,
    Sandbox,
    SandboxError,
    Sidecars,
    check_choice,
    runtime_class,
    shared_runtime,
)
from gymenvs.container.runtime.base import enforceable
from gymenvs.container.runtime.requirements import unmet
from gymenvs.core import EndedBy, Outcome, TextEnv, ending
from gymenvs.core.errors import ResetOptionsError, did_you_mean, short_repr
from gymenvs.core.outcomes import DETAIL_KEY, OUTCOME_KEY, REASON_KEY

T = TypeVar("T")
#: A family as `ContainerEnv` takes it: an object, its class, or "module:Class".
FamilyLike = TaskFamily | type[TaskFamily] | str


def sandbox_ending(exc: SandboxError) -> dict[str, str]:
    """The `info` entries of an episode a sandbox failure ended: infra, with the error's reason
    ("container_died", "oom_killed", "disk_limit", "image_missing", "engine_error")."""
    return ending(EndedBy.INFRA, exc.reason, str(exc))


def grade_ending(grade: Grade, ended: dict[str, str] | None = None) -> dict[str, str]:
    """Who ended an episode whose container was graded into `grade`, when the episode itself ended as `ended`
    (None: the agent submitted). An infra end stays infra; a grade that is no verdict is infra or invalid;
    otherwise the model's: "solved", else the episode's own reason (the turn limit...) or the grade's."""
    if ended is not None and ended[OUTCOME_KEY] != EndedBy.MODEL:
        return ended
    if grade.outcome != EndedBy.MODEL:
        return grade.ending()
    if ended is not None and not grade.resolved:
        return ending(EndedBy.MODEL, ended[REASON_KEY], f"{ended[DETAIL_KEY]} (graded: {grade.status})".strip())
    return grade.ending()


def present(value: T | None, missing: str) -> T:
    """`value`, or a `RuntimeError` saying what is `missing` (a part of an episode used outside one)."""
    if value is None:
        raise RuntimeError(missing)
    return value


def resolve_family(family: FamilyLike) -> TaskFamily | type[TaskFamily]:
    """A family object or class from what a container env was given ("module:Class" is imported)."""
    if isinstance(family, str):
        module, _, name = family.partition(":")
        family = getattr(importlib.import_module(module), name)
    if isinstance(family, TaskFamily) or (isinstance(family, type) and issubclass(family, TaskFamily)):
        return family
    raise ValueError(f"family={family!r}: allowed is a TaskFamily, its class, or 'module:Class' naming one")


class ContainerEnv(TextEnv):
    """One task of `family` per episode, in a container of `runtime` (default: the process's Docker engine,
    reached at the first reset; constructing an env touches no engine).

    Args:
        family: the task family (a `TaskFamily`, its class or "module:Class"); given as a class or a name, it is
            built from the keyword arguments that are its options (`dataset=`, `instance_ids=`...).
        runtime: the runtime every engine operation goes through: a name ("docker", "podman"), whose engine the
            process's envs share (`shared_runtime`), or a `Runtime` object. The tasks needing what it lacks
            (`Runtime.lacks`) are refused here, with why (`refused`); none left is a `ValueError`.
        engine: with a runtime name, its engine's URL (default: `DOCKER_HOST` / `CONTAINER_HOST`, else the
            runtime's standard socket).
        max_turns, render_mode: as every `TextEnv`.
        **options: the family's options (when it is given by class or name) and the env's (`config_class`).
    """

    reset_option_keys = frozenset({"instance_id"})
    config_class: ClassVar[type[ContainerConfig]] = ContainerConfig

    def __init__(self, family: FamilyLike, *, runtime: Runtime | str = "docker", engine: str | None = None,
                 max_turns: PositiveInt | None = None, render_mode: str | None = None, **options: Any):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self._runtime, self._engine = self._runtime_choice(runtime, engine)
        self.family, self.config = self._configure(resolve_family(family), options)
        self.tasks, self.refused = self._runtime_can_run(*self.family.episode_tasks())
        self.reset_option_keys = frozenset({"instance_id", *self.family.task_option_names})
        self.limits: Limits = Limits()
        self.task: Task | None = None  # as its current step runs it (`TaskFamily.at_step`)
        self._drawn: Task | None = None  # the task itself
        self.step_index = 0
        self.step_grades: list[Grade] = []
        self._checkpoints: list[str] = []  # the images later steps of the episode started from
        self.image: TaskImage | None = None
        self.grade: Grade | None = None
        self._sandbox: Sandbox | None = None
        self._sidecars: Sidecars | None = None
        self._pools: list[WarmPool] = []  # the warm pools this env has joined
        self._removals: list[Future] = []  # what of ended episodes is still being released in the background
        self._grading_ahead: Future[GradingAhead | None] | None = None  # the family's `grade_ahead`, once started

    @classmethod
    def option_names_for(cls, kwargs: Mapping[str, Any]) -> frozenset[str]:
        """The options of the family `kwargs` name besides the env's own (none for a family object, which holds
        its own): what `make_vec` accepts for this env besides its signature and `config_class`."""
        if "family" not in kwargs:
            return frozenset()
        family = resolve_family(kwargs["family"])
        return frozenset() if isinstance(family, TaskFamily) else family.option_names()

    @staticmethod
    def _runtime_choice(runtime: Runtime | str, engine: str | None) -> tuple[Runtime | str, str | None]:
        """`runtime` and `engine` checked: a known name and an engine URL, or a `Runtime` object alone."""
        if isinstance(runtime, str):
            check_choice(runtime, engine)
        elif not isinstance(runtime, Runtime):
            raise ValueError(f"runtime={short_repr(runtime)}: allowed are {', '.join(map(repr, RUNTIMES))} or a Runtime object")
        elif engine is not None:
            raise ValueError(f"engine={engine!r} beside a Runtime object, which has its own engine: give runtime a name")
        return runtime, engine

    def _runtime_can_run(self, tasks: tuple[Task, ...], refused: dict[str, str]) -> tuple[tuple[Task, ...], dict[str, str]]:
        """`tasks` without those needing what the runtime lacks (`Runtime.lacks`, known without an engine), which join
        `refused` with why; a `ValueError` if none is left."""
        runtime = self._runtime
        lacks = runtime_class(runtime).lacks if isinstance(runtime, str) else runtime.lacks
        name = runtime if isinstance(runtime, str) else runtime.name
        why = {task.instance_id: unmet(lacks, self.family.requirements(task)) for task in tasks}
        lacking = {instance_id: f"runtime {name!r} cannot run it: {reason}" for instance_id, reason in why.items() if reason}
        if lacking and len(lacking) == len(tasks):
            raise ValueError(f"runtime={name!r}: no task can run on it: {lacking}")
        return tuple(task for task in tasks if task.instance_id not in lacking), {**refused, **lacking}

    def _configure(self, family: TaskFamily | type[TaskFamily], options: dict[str, Any]) -> tuple[TaskFamily, ContainerConfig]:
        """The family (built from its options when given as a class) and the env's own config."""
        owner, named = type(self).__name__, ("max_turns", "render_mode", "runtime", "engine")  # __init__'s own arguments
        if isinstance(family, TaskFamily):
            check_no_family_options(owner, options, family)
            return family, split_options(owner, options, (), self.config_class, named)[1]
        family_options, config = split_options(f"{owner}(family={family.__name__})", options, family.option_names(),
                                               self.config_class, named)
        return family(**family_options), config

    # -- what the episode runs on -------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The runtime of this env's containers (given by name: the process's shared one, made at the first use)."""
        if isinstance(self._runtime, str):
            self._runtime = shared_runtime(self._runtime, self._engine)
        return self._runtime

    @property
    def reaped(self) -> list[str]:
        """What processes that are gone left behind and this process removed at its first reset (it reaps once):
        containers, grading snapshots and volumes, channel directories."""
        return reap_once(self.runtime)

    @property
    def episode_task(self) -> Task:
        """The task of the current (or last) episode."""
        return present(self.task, "no episode has started: call reset()")

    @property
    def episode_image(self) -> TaskImage:
        return present(self.image, "no episode has started: call reset()")

    @property
    def episode_sandbox(self) -> Sandbox:
        """The container the current episode runs in."""
        return present(self._sandbox, "the episode has no container: it has ended, or none started")

    @property
    def workdir(self) -> str:
        return self.episode_image.workdir

    # -- episodes -----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """As `TextEnv.reset`, the info naming the task, its image and the runtime (`Runtime.info`: what it is, and
        the resource limits its containers do not get)."""
        observation, info = super().reset(seed=seed, options=options)
        info.update(instance_id=self.episode_task.instance_id, image=self.episode_sandbox.image, runtime=self.runtime.info())
        return observation, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """As `TextEnv.step`; the episode's first step starts the family's `grade_ahead` in the background (not
        `reset`, whose own start-up it would slow), and a step that ends the episode ungraded discards it."""
        if self._sandbox is not None and self._grading_ahead is None and not self._done and self._grades_ahead:
            self._grading_ahead = in_thread(self._make_grading_ahead, "gymenvs-grading-ahead")
        result = super().step(action)
        if self._done:  # ended ungraded (its container died, say), if grading did not take it
            self._discard_grading_ahead(wait=True)
        return result

    def close(self) -> None:
        self._release()
        self._discard_grading_ahead()
        self._remove_leftovers()
        for removal in self._removals:  # the background releases of ended episodes
            removal.result()
        self._removals.clear()
        for pool in self._pools:
            pool.leave()
        self._pools.clear()
        super().close()

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._release(wait=False)  # the last episode's container goes in the background: this one need not wait
        self._discard_grading_ahead()
        self._remove_leftovers()
        task = self._drawn = self._find_task(options)
        self.task = self.family.at_step(task, 0)
        self.step_index, self.step_grades, self.grade = 0, [], None
        self.limits = self._limits_of(self.task)
        self.image = self.family.image(task, self.runtime, pull=self.config.pull, registry=self.config.registry)
        reap_once(self.runtime)
        self._sidecars = self.family.start_sidecars(task, self.runtime, episode_id=self._episode_id or "",
                                                    limits=self.limits, pull=self.config.pull,
                                                    registry=self.config.registry)
        self.limits = self._limits_of(self.task)  # on the sidecars' network, if any
        try:
            return self._begin(self.task)
        except BaseException:
            self._remove_leftovers()
            raise

    def _limits_of(self, task: Task) -> Limits:
        """The family's limits for `task`, with the env's pids limit and the episode's sidecars' network, as the runtime
        enforces them (`LimitsNotEnforced` for one it cannot, unless the config says to run without)."""
        network_name = None if self._sidecars is None else self._sidecars.network
        limits = dataclasses.replace(self.family.limits(task), pids_limit=self.config.pids_limit, network_name=network_name,
                                     unenforced_limits=self.config.unenforced_limits)
        return enforceable(limits, self.runtime.unenforced, self.runtime.name)

    @property
    def _pooled(self) -> bool:
        """Whether the episode's container comes from the warm pool: not for a task with sidecars (it starts its
        own, on their network), nor for a later step (it starts from the last step's files)."""
        return bool(self.config.warm_pool) and self._sidecars is None and self.step_index == 0

    def _begin(self, task: Task) -> str:
        """Start what acts in the episode's container (setting `_sandbox`); the first observation."""
        raise NotImplementedError

    def _release(self, wait: bool = True) -> None:
        """Stop what acts in the container and remove it (`wait=False`: in the background)."""
        raise NotImplementedError

    def _remove_leftovers(self) -> None:
        """Remove the episode's sidecars and the images its later steps started from (once it is graded: the
        tests may talk to the sidecars)."""
        if self._sidecars is not None:
            self._sidecars.remove()
            self._sidecars = None
        for image in self._checkpoints:
            self.runtime.remove_image(image)
        self._checkpoints.clear()

    def _discard_sandbox(self, wait: bool) -> None:
        if self._sandbox is not None:
            removal = discard(self._sandbox, wait=wait)
            self._removals = [r for r in self._removals if not r.done()] + ([removal] if removal else [])
            self._sandbox = None

    def _pool(self, image: str, **settings: Any) -> WarmPool:
        """The warm pool of `image` with these settings, joined once."""
        pool = WarmPool.for_image(self.runtime, image, size=self.config.warm_pool, limits=self.limits,
                                  pull=self.config.pull, registry=self.config.registry, workdir=self.workdir,
                                  **settings)
        if pool not in self._pools:
            pool.join()
            self._pools.append(pool)
        return pool

    def _find_task(self, options: dict[str, Any]) -> Task:
        """The task `options` names ("instance_id", or a family's own key), else one drawn with the episode's seed."""
        named = {key: options[key] for key in ("instance_id", *self.family.task_option_names) if key in options}
        if len(set(map(repr, named.values()))) > 1:
            raise ResetOptionsError("reset(options=...): " + " and ".join(f"{k}={v!r}" for k, v in named.items())
                                    + " name different tasks: give one")
        if not named:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        name = next(iter(named.values()))
        for task in self.tasks:
            if task.instance_id == name:
                return task
        if not isinstance(name, str):
            raise ResetOptionsError(f"reset option instance_id={short_repr(name)}: expected a str, the instance_id of a "
                                    f"task of this env ({len(self.tasks)} tasks)")
        if name in self.refused:
            raise ResetOptionsError(f"instance_id={name!r} is never drawn: {self.refused[name]}")
        known = ", ".join(t.instance_id for t in self.tasks[:5]) + (", ..." if len(self.tasks) > 5 else "")
        close = did_you_mean(name, [task.instance_id for task in self.tasks])
        raise ResetOptionsError(f"instance_id={name!r} is not a task of this env{close} ({len(self.tasks)} tasks: {known})")

    # -- the end of an episode ----------------------------------------------------------------

    def _grade_and_end(self, ended: dict[str, str] | None = None) -> tuple[Grade, dict[str, Any], str | None]:
        """Grade the step the agent ended (`ended`: how, None if it finished: `grade_ending`), then begin the next
        step if there is one and the family `goes_on`: (the step's grade, the info keys it fills, the next step's
        first observation). Else end the episode: (its grade, the info keys, None). Its grade is the family's
        `combine` of its steps', or the last step's when that is no verdict on the agent. Only a step the agent
        finished goes on."""
        last = ended is not None or self.step_index + 1 >= self.family.step_count(self.episode_task)
        grade, checkpoint, died = self._grade_step(ended, keep_files=not last)
        self.step_grades.append(grade)
        if checkpoint is not None and self.family.goes_on(self.episode_task, grade):
            observation = self._next_step(checkpoint)
            return grade, self._steps_info(), observation
        if len(self.step_grades) > 1 and grade.outcome == EndedBy.MODEL:
            grade = self.family.combine(self.episode_task, self.step_grades)
        self.grade = grade
        self._remove_leftovers()
        who = died if died is not None else grade_ending(grade, ended)
        return grade, {**self._grade_info(grade), **self._steps_info(), **who}, None

    def _grade_step(self, ended: dict[str, str] | None, *, keep_files: bool) -> tuple[Grade, str | None, dict[str, str] | None]:
        """Freeze the step's container, have the family grade it, then release it: the grade, the image of its
        files as the agent left them (`keep_files`: for the next step), and who ended the episode if the
        container died or outgrew its disk limit (then it is not graded)."""
        sandbox = self.episode_sandbox
        try:
            sandbox.ensure_running()
            if ended is None or ended[OUTCOME_KEY] == EndedBy.MODEL:  # an infra end (the disk limit too) is graded as it is
                sandbox.check_disk(force=True)  # a file written past the limit by the last command, just before submit
        except (ContainerGone, DiskLimitExceeded) as exc:
            self._release()
            what = "died" if isinstance(exc, ContainerGone) else "outgrew its disk limit"
            return Grade.infra(exc.reason, f"the agent's container {what}: {exc}"), None, sandbox_ending(exc)
        try:
            if self.family.pause_before_grading:
                sandbox.pause()  # nothing left running in it changes its files now
        except SandboxError:  # already gone: grading reports what it can read
            pass
        checkpoint = self._checkpoint(sandbox) if keep_files else None
        released: list[Future] = []  # the container removed while the tests run, once the family has read it

        def done_with_sandbox() -> None:
            if not released:
                released.append(in_thread(self._release, "gymenvs-release"))

        run = GradingRun(self.runtime, sandbox, self.episode_task, self.episode_image, self.limits, self._episode_id or "",
                         done_with_sandbox=done_with_sandbox, ahead=self._take_grading_ahead())
        try:
            grade = self.family.grade(run)
        finally:
            if released:
                released[0].result()  # nothing of the episode is left when the step returns
            else:
                self._release()
        return grade, checkpoint, None

    @property
    def _grades_ahead(self) -> bool:
        """Whether the family makes anything ready ahead of grading (no thread per episode for one that does not)."""
        return type(self.family).grade_ahead is not TaskFamily.grade_ahead

    def _make_grading_ahead(self) -> GradingAhead | None:
        return self.family.grade_ahead(self.episode_task, self.runtime, image=self.episode_image, limits=self.limits,
                                       episode_id=self._episode_id or "", sandbox=self.episode_sandbox)

    def _take_grading_ahead(self) -> GradingAhead | None:
        """What `grade_ahead` made for this step, once it is done; None if nothing, or if it failed (grading then
        starts what it needs itself, and reports the engine's error if that fails too)."""
        future, self._grading_ahead = self._grading_ahead, None
        if future is None or future.exception() is not None:
            return None
        return future.result()

    def _discard_grading_ahead(self, wait: bool = False) -> None:
        """Release what `grade_ahead` made for an episode that ends ungraded (`wait=False`: in the background)."""
        future, self._grading_ahead = self._grading_ahead, None
        if future is None:
            return

        def discard_when_made() -> None:
            if future.exception() is None and (ahead := future.result()) is not None:
                ahead.discard()

        if wait:
            discard_when_made()
        else:
            self._removals = [r for r in self._removals if not r.done()] + [in_thread(discard_when_made, "gymenvs-release")]

    def _checkpoint(self, sandbox: Sandbox) -> str | None:
        """The container's files as an image the next step starts from (None if it cannot be taken); the engine pauses
        it while it commits."""
        try:
            image = sandbox.commit("gymenvs-step", f"{self._episode_id}-{self.step_index}")
        except SandboxError:
            return None
        self._checkpoints.append(image)
        return image

    def _next_step(self, checkpoint: str) -> str:
        """Begin the next step in a container of `checkpoint`; its first observation."""
        assert self._drawn is not None
        self.step_index += 1
        self.task = self.family.at_step(self._drawn, self.step_index)
        self.limits = self._limits_of(self.task)  # a step may have its own network
        self.image = dataclasses.replace(self.episode_image, name=checkpoint)
        return self._begin(self.task)

    def _steps_info(self) -> dict[str, Any]:
        """For a task of several steps: `info["steps"]` (each graded step's index, reward, outcome and reason) and
        `info["step"]` (the index of the step now running, or the last one)."""
        if self.family.step_count(self.episode_task) == 1:
            return {}
        return {"steps": [{"step": i, "reward": g.reward, "outcome": g.outcome, "reason": g.reason}
                          for i, g in enumerate(self.step_grades)], "step": self.step_index}

    @staticmethod
    def _grade_info(grade: Grade) -> dict[str, Any]:
        return {"report": grade.report, "status": grade.status, **grade.info}

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
            "family": self.family.name,
            "instance_id": self.task.instance_id if self.task else None,
            "container": self._sandbox.name if self._sandbox else None,
            "status": self.grade.status if self.grade else None,
        }
