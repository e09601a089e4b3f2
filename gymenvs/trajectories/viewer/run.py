"""A run: the trajectory files under a path, each summed up in one row for the run page.

A row is read from the file's JSON directly (no model validation: a run of 1,000 long episodes must open in
well under a second); an episode is validated as an `atif.Trajectory` when it is opened. A `*.json` file that is
not an ATIF trajectory (a Harbor trial's `result.json`, a config) is listed among the run's skipped files, with why.

A run that is still being written (a training run's batches) is followed: `refresh` reads the files that are new
or changed since the last look, and forgets those that are gone. An episode keeps its id for as long as its file is
there: the files found at first are numbered in name order (numbers as numbers), those that come later after them.

A Harbor trial keeps its trajectory in `<trial>/agent/trajectory.json` and how it went in `<trial>/result.json`:
the row of such a trajectory takes its task, reward, error and time from there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymenvs.trajectories.agent_calls import SIDE_CALL
from gymenvs.trajectories.files import SCHEMA_PREFIX, natural_key, read_trajectory
from gymenvs.trajectories.recorder import EXTRA_KEY

if TYPE_CHECKING:
    import atif


@dataclass
class _Seen:
    """What the last look at one file found: its size and time, and its row, or why it has none."""

    stamp: tuple[int, int]
    row: dict[str, Any] | None
    why: str = ""


class Run:
    """The trajectory files under `root` (a file, or a folder searched to any depth): `rows` (one per trajectory, each
    with its `id` and `file`), and `skipped` (the other JSON files, with why). Safe to use from several threads."""

    def __init__(self, root: Path):
        self.root = root
        self.rows: list[dict[str, Any]] = []
        self.skipped: list[dict[str, str]] = []
        self._seen: dict[Path, _Seen] = {}
        self._files_by_id: dict[int, Path] = {}
        self._ids: dict[Path, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """The run under `path`, its files read; `FileNotFoundError` when it does not exist."""
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(f"{str(root)!r} does not exist: expected an ATIF trajectory file or a folder of them")
        run = cls(root)
        run.refresh()
        return run

    def refresh(self) -> None:
        """Read the files that are new or changed since the last look; forget those that are gone."""
        with self._lock:
            self._seen = {file: self._look(file) for file in self._files()}
            found = {seen.row["id"]: (file, seen.row) for file, seen in self._seen.items() if seen.row is not None}
            self._files_by_id = {episode_id: file for episode_id, (file, _) in found.items()}
            self.rows = [found[episode_id][1] for episode_id in sorted(found)]
            self.skipped = [{"file": self._name(file), "why": seen.why} for file, seen in self._seen.items() if seen.row is None]

    def neighbours(self, episode_id: int) -> tuple[dict[str, Any], int | None, int | None]:
        """Episode `episode_id`'s row, and the ids of the episodes before and after it (None at either end);
        `KeyError` when the run has no such episode (any more)."""
        with self._lock:
            ids = [row["id"] for row in self.rows]
            if episode_id not in ids:
                raise KeyError(f"episode {episode_id}: the run has no such episode")
            at = ids.index(episode_id)
            return self.rows[at], ids[at - 1] if at > 0 else None, ids[at + 1] if at + 1 < len(ids) else None

    def episode(self, episode_id: int) -> atif.Trajectory:
        """Episode `episode_id`, validated: `KeyError` when the run has no such episode (any more), `ReplayFileError`
        when its file is not a valid trajectory."""
        with self._lock:
            file = self._files_by_id.get(episode_id)
        if file is None:
            raise KeyError(f"episode {episode_id}: the run has no such episode")
        return read_trajectory(file)

    def _files(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        files = (file for file in self.root.rglob("*.json") if file.is_file())
        return sorted(files, key=lambda file: natural_key(self._name(file)))

    def _look(self, file: Path) -> _Seen:
        """What `file` holds now; the last look's, when its size and time have not changed since."""
        stamp = (0, 0)
        try:
            status = file.stat()
            stamp = (status.st_mtime_ns, status.st_size)
            seen = self._seen.get(file)
            if seen is not None and seen.stamp == stamp:
                return seen
            row = {**summary(json.loads(file.read_bytes())), **harbor_trial(file)}
        except (OSError, ValueError) as exc:  # a file half written is read again once it changes
            return _Seen(stamp, None, getattr(exc, "strerror", None) or str(exc))
        return _Seen(stamp, {"id": self._ids.setdefault(file, len(self._ids)), "file": self._name(file), **row})

    def _name(self, file: Path) -> str:
        return file.name if file == self.root else str(file.relative_to(self.root))


def summary(data: Any) -> dict[str, Any]:
    """One trajectory's row: env, task, seed, reward, outcome, turns, tokens, seconds...; `ValueError` when `data`
    is not an ATIF trajectory."""
    if not isinstance(data, Mapping) or not str(data.get("schema_version", "")).startswith(SCHEMA_PREFIX):
        raise ValueError("not an ATIF trajectory (no schema_version ATIF-v1.x)")
    steps = data.get("steps") or []
    agent = data.get("agent") or {}
    episode = (data.get("extra") or {}).get(EXTRA_KEY) or {}
    report = episode.get("report") or {}
    env = str(episode.get("env_id") or "")
    return {
        "env": env or None,
        "task": str(report.get("instance_id") or report.get("task") or env.rsplit("/", 1)[-1] or agent.get("name") or "?"),
        "seed": episode.get("seed"),
        "agent": agent.get("name"),
        "model": agent.get("model_name"),
        "reward": episode.get("reward"),
        "outcome": episode.get("outcome"),
        "outcome_reason": episode.get("outcome_reason"),
        "end": episode.get("end"),
        "turns": episode.get("turns", sum(1 for step in steps if step.get("source") == "agent" and not _side(step))),
        "steps": len(steps),
        "tokens": _tokens(data.get("final_metrics") or {}),
        "seconds": episode.get("seconds"),
        "error": episode.get("error"),
    }


def harbor_trial(path: Path) -> dict[str, Any]:
    """What a Harbor trial's `result.json` says of the trajectory at `<trial>/agent/trajectory.json`; {} for others."""
    result_path = path.parent.parent / "result.json"
    if path.parent.name != "agent" or not result_path.is_file():
        return {}
    try:
        result = json.loads(result_path.read_bytes())
        rewards = (result.get("verifier_result") or {}).get("rewards") or {}
        error = result.get("exception_info") or {}
        row = {"task": str(result["task_name"]), "reward": rewards.get("reward", next(iter(rewards.values()), None)),
               "error": f"{error['exception_type']}: {error['exception_message']}" if error else None,
               "seconds": _seconds(result.get("started_at"), result.get("finished_at"))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # not a trial result after all
    return {key: value for key, value in row.items() if value is not None}


def _seconds(started: str | None, finished: str | None) -> float | None:
    if not started or not finished:
        return None
    return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()


def _side(step: Mapping[str, Any]) -> bool:
    return SIDE_CALL in (step.get("extra") or {})


def _tokens(final: Mapping[str, Any]) -> int | None:
    counts = [final.get("total_prompt_tokens"), final.get("total_completion_tokens")]
    known = [count for count in counts if isinstance(count, int)]
    return sum(known) if known else None
