"""The Harbor task family: task folders in the Harbor format (Terminal-Bench 2 and its adapters), each with
its own image, limits, instruction and tests.

gymenvs/Terminal-v0 is `ToolsEnv(family=HarborFamily)` and gymenvs/TerminalAgent-v0 `AgentEnv(family=HarborFamily)`.
The task's image is built from its environment/, its container gets the cpus, memory, storage and
network of its task.toml, and grading runs its tests/test.sh where the agent cannot reach
(`gymenvs.terminal.grading.grade_task`).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import PositiveFloat

from gymenvs.container.config import Size
from gymenvs.container.family import FamilyOptions, Grade, GradingAhead, GradingRun, TaskFamily, TaskImage
from gymenvs.container.runtime import Limits, Runtime, Sandbox, Sidecars, parse_size
from gymenvs.container.validation import TaskValidation
from gymenvs.core.outcomes import EndedBy
from gymenvs.terminal import steps
from gymenvs.terminal.compose import start_sidecars, unsupported
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.images import ensure_task_image, sidecar_images
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import load_terminal_tasks
from gymenvs.terminal.verifier import VerifierAhead, network_limits


class HarborOptions(FamilyOptions):
    """The options of the Harbor family. A container's cpus, memory, storage and network come from each task's
    task.toml, not from here."""

    dataset: str = "fixtures"
    """"fixtures" (the Harbor tasks shipped with gymenvs), a task folder or a folder of them, an archive
    (.tar.gz, .zip, ...), a dataset of task files (.jsonl/.parquet), or a Hub dataset (gymenvs/terminal/tasks.py)."""
    internet: bool = True
    """Give the agent's container the network its task asks for ([agent], else [environment]: network_mode
    "public", Harbor's default, or "allowlist" and its allowed_hosts); False: never. Grading does not follow
    this: the tests get the network of the task's [verifier] (else [environment]) policy, since test.sh often
    installs its own tools (docs/terminal.md)."""
    verifier_timeout_s: PositiveFloat | None = None
    """Seconds tests/test.sh may run (default: the task's [verifier] timeout_sec)."""
    keep_snapshots: bool = False
    """Keep each graded snapshot as an image (`info["report"]["snapshot"]`) that `gymenvs tasks regrade` grades
    again. They cost disk and outlive the process: `docker image prune -a --filter
    label=gymenvs.container.role=episode` removes them."""
    keep_changes: bool = False
    """Keep in each grading report (`info["report"]["changes"]`) the files the agent added, changed and deleted in
    its container, so that `gymenvs tasks regrade` grades the episode again from its trajectory alone, in a fresh
    container of the task's image (gymenvs/terminal/changes.py). They cost the report's size, up to `changes_limit`."""
    changes_limit: Size = "4m"
    """The most bytes the kept changes may take, compressed (size syntax, e.g. "4m"); past it, the report keeps
    none and says why (the episode is graded all the same)."""


class HarborFamily(TaskFamily[TerminalTask, HarborOptions]):
    """Harbor tasks: the reward is the task's tests' reward.txt, or reward.json's "reward" (its named scores in
    `info["scores"]`). `reset(options={"task": name})` (or "instance_id") picks a task by its name."""

    name = "harbor"
    Options = HarborOptions
    task_option_names = frozenset({"task"})
    agent_environment = {"GYMENVS_TASK_STYLE": "terminal"}
    # Grading records the services the agent left listening, which takes a process in the running container, and then
    # stops the container itself (gymenvs.terminal.grading): a paused container runs no process.
    pause_before_grading = False

    def load_tasks(self) -> Sequence[TerminalTask]:
        return load_terminal_tasks(self.options.dataset, split=self.options.split)

    def refused(self, tasks: Sequence[TerminalTask]) -> dict[str, str]:
        """Besides the validation report's: the tasks gymenvs cannot run as Harbor would (a wildcard allowlist, a
        compose file asking what it does not apply), with why."""
        why = {task.name: wildcard_refusal(task) or (unsupported(task) if task.compose_file else None) for task in tasks}
        return {**super().refused(tasks), **{name: reason for name, reason in why.items() if reason}}

    def start_sidecars(self, task: TerminalTask, runtime: Runtime, *, episode_id: str, limits: Limits,
                       pull: bool = False, registry: str | None = None) -> Sidecars | None:
        """A compose task's other services, on the project's private network (`gymenvs.terminal.compose`)."""
        if task.compose_file is None:
            return None
        return start_sidecars(runtime, task, sidecar_images(runtime, task, pull=pull, registry=registry), episode_id=episode_id,
                              network=limits.network)

    def limits(self, task: TerminalTask) -> Limits:
        environment = task.config.environment
        if environment.gpus:
            raise ValueError(f"task {task.name!r} asks for {environment.gpus} GPU(s): gymenvs gives containers none")
        network = network_limits(*task.config.agent_network)
        if not self.options.internet:
            network["network"] = False
        return Limits(mem_limit=f"{environment.memory_mb}m", cpus=environment.cpus, disk_limit=environment.storage_mb << 20,
                      **network)

    def image(self, task: TerminalTask, runtime: Runtime, *, pull: bool = False, registry: str | None = None) -> TaskImage:
        """The task's image (built from environment/ on first use), and a compose task's sidecars'; its WORKDIR is
        where the agent works."""
        name = ensure_task_image(runtime, task, pull=pull, registry=registry)
        if task.compose_file is not None:
            sidecar_images(runtime, task, pull=pull, registry=registry)
        workdir = runtime.image_config(name).workdir
        return TaskImage(name, workdir, f"cd {shlex.quote(workdir)}")

    def instruction(self, task: TerminalTask) -> str:
        return task.instruction

    def agent_timeout_s(self, task: TerminalTask) -> float | None:
        return task.config.agent.timeout_sec

    def grade_ahead(self, task: TerminalTask, runtime: Runtime, *, image: TaskImage, limits: Limits, episode_id: str,
                    sandbox: Sandbox) -> GradingAhead | None:
        """The verifier, a container of the task's image with the tests in place, started while the agent works
        (`gymenvs.terminal.verifier.VerifierAhead`): grading copies the agent's changes into it. None where grading
        takes a snapshot of the agent's container instead: for the steps after a task's first, whose containers start
        from the step before's files, not from the task's image; where the runtime cannot hand the changes over
        (`Sandbox.reads_layer`: Podman, an engine on another host); and where the snapshot is kept."""
        later_step = task.step is not None and task.steps.index(task.step) > 0
        if later_step or self.options.keep_snapshots or not sandbox.reads_layer():
            return None
        return VerifierAhead.start(runtime, image.name, task, limits=limits, workdir=image.workdir)

    def grade(self, run: GradingRun[TerminalTask]) -> Grade:
        """The task's tests on the agent's files (its container, which this stops): in the verifier started ahead,
        the agent's changes copied in, or in a fresh container of a snapshot of its container."""
        options = self.options
        changes_limit = parse_size(options.changes_limit) if options.keep_changes else None
        ahead = run.ahead.verifier if isinstance(run.ahead, VerifierAhead) else None
        return as_grade(run.task, grade_task(run.sandbox, run.task, timeout_s=options.verifier_timeout_s,
                                             keep_snapshot=options.keep_snapshots, changes_limit=changes_limit,
                                             ahead=ahead))

    # -- tasks of several steps ([[steps]]: gymenvs.terminal.steps) ----------------------------

    def step_count(self, task: TerminalTask) -> int:
        return len(task.steps) or 1

    def at_step(self, task: TerminalTask, index: int) -> TerminalTask:
        return task.at_step(index) if task.steps else task

    def prepare_step(self, task: TerminalTask, sandbox: Sandbox) -> None:
        steps.prepare_step(sandbox, task)

    def goes_on(self, task: TerminalTask, grade: Grade) -> bool:
        return steps.goes_on(task, verifier_result(grade))

    def combine(self, task: TerminalTask, grades: Sequence[Grade]) -> Grade:
        return as_grade(task, steps.combine(task, [verifier_result(grade) for grade in grades]), step=False)

    def validate(self, task: TerminalTask, runtime: Runtime, *, runs: int = 1,
                 timeout_s: float | None = None) -> TaskValidation:
        """Run `runs` times empty and `runs` times with its oracle, each graded (`gymenvs.terminal.validate`)."""
        from gymenvs.terminal.validate import run_episode, validate_task

        return validate_task(task, lambda task, oracle: run_episode(runtime, task, oracle, timeout_s=timeout_s), runs)

    def regrade(self, task: TerminalTask, stored: Mapping[str, Any], runtime: Runtime) -> Grade:
        """What the episode's grading kept, graded again by the task's tests now (`gymenvs.terminal.regrading`): its
        snapshot (`keep_snapshots=True`) while that image is there, else its changed files (`keep_changes=True`)."""
        from gymenvs.terminal.regrading import regrade_report

        report = stored.get("report") or {}
        return as_grade(task, regrade_report(runtime, task, report, timeout_s=self.options.verifier_timeout_s))

    def fingerprint(self, task: TerminalTask) -> str:
        from gymenvs.terminal.validate import fingerprint

        return fingerprint(task)

    def write_tasks(self, tasks: Sequence[TerminalTask], path: str | Path) -> int:
        """The tasks' folders, one per line: a file `dataset=` reads."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("".join(f"{task.path.resolve()}\n" for task in tasks))
        return len(tasks)


def wildcard_refusal(task: TerminalTask) -> str | None:
    """Why a task whose allowlist names a "*." wildcard cannot run here, or None: gymenvs enforces an allowlist by
    address, and a wildcard's subdomains have none known in advance (Harbor's proxy reads each connection's name)."""
    config = task.config
    sections = [config.environment, config.agent, config.verifier,
                *(part for step in config.steps for part in (step.agent, step.verifier))]
    wildcards = sorted({host for section in sections for host in section.allowed_hosts or () if host.startswith("*.")})
    if not wildcards:
        return None
    return (f"task {task.name!r}: allowed_hosts {wildcards} name wildcards, which gymenvs cannot enforce: it allows "
            "addresses (IPs, CIDR ranges, host names resolved when the container starts)")


def verifier_result(grade: Grade) -> VerifierResult:
    """The verifier's result a Harbor `Grade` was made of (`as_grade`), or an infra grade's."""
    if "reward" not in grade.report:
        return VerifierResult(None, outcome=grade.outcome, reason=grade.reason, detail=grade.detail)
    return VerifierResult(**{f.name: grade.report[f.name] for f in dataclasses.fields(VerifierResult)})


def as_grade(task: TerminalTask, result: VerifierResult, *, step: bool = True) -> Grade:
    """A verifier's result as the platform's `Grade` (naming the step of a step's view, unless `step=False`)."""
    scores = ", ".join(f"{name} {value:g}" for name, value in result.scores.items() if name != "reward")
    verdict = result.outcome == EndedBy.MODEL
    summary = (f"The task's tests ran: reward {result.reward or 0.0:g} ({result.reason})"
               + (f"; scores: {scores}" if scores else "") + ("." if verdict else f". {result.detail}"))
    named = {"step": task.step.name} if step and task.step is not None else {}
    return Grade(result.reward or 0.0, result.outcome, result.reason, result.detail, result.reason,
                 {"task": task.name, **named, **result.to_dict()}, {"scores": dict(result.scores)}, summary)
