"""Re-grading stored episodes: their trajectories graded again by the current grader and tasks, without the agent.

`gymenvs tasks regrade PATH` reads the ATIF trajectories under PATH (`gymenvs.trajectories`), finds each
episode's task in the dataset, and has the task's family grade what the episode left (`TaskFamily.regrade`: SWE
from the stored diff, Harbor from the snapshot or the changed files it kept) through the same grading path as an
episode and `gymenvs tasks validate`. The result says, per episode, the reward stored and the reward now, and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymenvs.container.family import Grade, Task, TaskFamily
from gymenvs.container.runtime import Runtime, SandboxError
from gymenvs.core.outcomes import EndedBy

#: The env of a trajectory names its family, when `--format` does not.
FAMILY_OF_ENV = {"gymenvs/SWE-v0": "swe", "gymenvs/SWEAgent-v0": "swe", "gymenvs/Terminal-v0": "harbor",
                 "gymenvs/TerminalAgent-v0": "harbor"}


@dataclass(frozen=True)
class StoredEpisode:
    """One trajectory file's episode: its task and what its grading stored (`extra["gymenvs"]`)."""

    path: Path
    env_id: str | None
    instance_id: str
    reward: float
    stored: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> StoredEpisode:
        """The episode of one trajectory file; `ValueError` naming it when it holds no graded episode."""
        from gymenvs.trajectories.files import read_trajectory
        from gymenvs.trajectories.recorder import EXTRA_KEY

        stored = (read_trajectory(path).extra or {}).get(EXTRA_KEY, {})
        report = stored.get("report") or {}
        instance_id = report.get("instance_id") or report.get("task")
        if not instance_id:
            raise ValueError(f"{path}: the episode has no grading report naming its task (an SWE or Terminal episode "
                             "recorded by `gymenvs eval --trajectories`, RecordTrajectories or a rollout)")
        return cls(path, stored.get("env_id"), str(instance_id), float(stored.get("reward", 0.0)), stored)


@dataclass(frozen=True)
class Regraded:
    """An episode graded again: its reward then and now, and why now (the grade's summary, as the agent reads it).
    A grading that could not run (the engine failed, the tests timed out) is an error, never a changed reward."""

    episode: StoredEpisode
    grade: Grade | None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.grade is None or self.grade.outcome == EndedBy.INFRA

    @property
    def changed(self) -> bool:
        return not self.failed and self.grade is not None and self.grade.reward != self.episode.reward

    def line(self) -> str:
        now = "error" if self.failed or self.grade is None else f"{self.grade.reward:g}"
        why = self.error if self.grade is None else " ".join((self.grade.summary or self.grade.reason).split())
        status = "error" if self.failed else "changed" if self.changed else "same"
        return f"{self.episode.path.name}\t{self.episode.instance_id}\t{self.episode.reward:g} -> {now}\t{status}\t{why}"


def trajectory_files(path: Path) -> list[Path]:
    """A trajectory file, or every `*.json` under a folder (a rollout's batches included), in path order."""
    if not path.is_dir():
        return [path]
    return sorted(file for file in path.rglob("*.json") if file.is_file())


def regrade_episodes(episodes: Sequence[StoredEpisode], family: TaskFamily, runtime: Runtime, *,
                     workers: int = 1, on_done: Callable[[Regraded], None] = lambda _: None) -> list[Regraded]:
    """Grade each episode again with `family` (its task looked up by id), `workers` at a time, in their order."""
    tasks: dict[str, Task] = {task.instance_id: task for task in family.load_tasks()}

    def regrade(episode: StoredEpisode) -> Regraded:
        task = tasks.get(episode.instance_id)
        if task is None:
            result = Regraded(episode, None, f"task {episode.instance_id!r} is not in the dataset")
        else:
            try:
                result = Regraded(episode, family.regrade(task, episode.stored, runtime))
            except (ValueError, SandboxError) as exc:  # not enough stored, or the engine failed: this episode only
                result = Regraded(episode, None, str(exc))
        on_done(result)
        return result

    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="gymenvs-regrade") as pool:
        return list(pool.map(regrade, episodes))
