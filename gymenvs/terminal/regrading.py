"""Grading a stored Terminal episode again (`gymenvs tasks regrade`: `HarborFamily.regrade`) from what its grading
kept, by the task's tests of now, through the grading path of an episode (`grade_task`).

What the grading report names is graded again:

- the snapshot (`keep_snapshots=True`), while its image is still there: a container started from it holds every
  file as the agent left it;
- else the changed files (`keep_changes=True`, `gymenvs.terminal.changes`): put back in a fresh container of the
  task's image, with no image kept beside the trajectory.

Either way the services the episode's grading started again for the tests are started again, and a compose task's
sidecars start afresh (what the agent left in them is not there). A task of several steps cannot be graded again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from gymenvs.container.runtime import Runtime, Sandbox
from gymenvs.terminal.changes import KeptChanges, put_back
from gymenvs.terminal.grading import VerifierResult, grade_task
from gymenvs.terminal.images import ensure_task_image
from gymenvs.terminal.services import Recording
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.validate import sidecars_of, task_limits


def regrade_report(runtime: Runtime, task: TerminalTask, report: Mapping[str, Any], *,
                   timeout_s: float | None = None) -> VerifierResult:
    """The episode a grading `report` describes, graded again from its snapshot while that image is there, else from
    its changed files, with the services its grading started again; `ValueError` saying what is missing when neither
    is there."""
    if task.steps:
        raise ValueError(f"{task.name}: a task of several steps cannot be graded again from what one grading kept")
    services = Recording.from_list(report.get("recorded") or [])
    snapshot = report.get("snapshot") or ""
    if snapshot and runtime.image_exists(snapshot):
        return _grade_again(runtime, task, snapshot, services=services, timeout_s=timeout_s)
    if not report.get("changes"):
        why = f"its snapshot {snapshot} is gone" if snapshot else "the episode kept no snapshot"
        raise ValueError(f"{task.name}: {why} and no changed files to grade again (run it with keep_snapshots=True "
                         "or keep_changes=True)")
    changes = KeptChanges.from_dict(report["changes"])
    if changes.not_kept:
        raise ValueError(f"{task.name}: the episode's changed files were not kept: {changes.not_kept}")
    return _grade_again(runtime, task, ensure_task_image(runtime, task), services=services, timeout_s=timeout_s,
                        prepare=lambda sandbox: put_back(sandbox, changes))


def _grade_again(runtime: Runtime, task: TerminalTask, image: str, *, services: Recording, timeout_s: float | None,
                 prepare: Callable[[Sandbox], None] = lambda _: None) -> VerifierResult:
    """A container of `image` (beside the task's sidecars, started afresh), readied by `prepare`, graded as an
    episode's is."""
    with sidecars_of(runtime, task) as network_name:
        limits = dataclasses.replace(task_limits(task), network_name=network_name)
        sandbox = runtime.start(image, role="regrade", episode_id=task.name, limits=limits,
                                workdir=runtime.image_config(image).workdir)
        try:
            prepare(sandbox)
            return grade_task(sandbox, task, timeout_s=timeout_s, services=services)
        finally:
            sandbox.remove()
