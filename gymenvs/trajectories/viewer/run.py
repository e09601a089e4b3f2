"""A run: the trajectory files under a path, each summed up in one row for the run page.

A row is read from the file's JSON directly (no model validation: a run of 1,000 long episodes must open in
well under a second); an episode is validated as an `atif.Trajectory` when it is opened. A `*.json` file that is
not an ATIF trajectory (a Harbor trial's `result.json`, a config) is listed among the run's skipped files, with why.

A Harbor trial keeps its trajectory in `<trial>/agent/trajectory.json` and how it went in `<trial>/result.json`:
the row of such a trajectory takes its task, reward, error and time from there.
"""

from __future__ import annotations

import json
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


@dataclass(frozen=True)
class Run:
    """The trajectory files under `root` (a file, or a folder searched to any depth), their rows, and the skipped."""

    root: Path
    files: list[Path]
    rows: list[dict[str, Any]]
    skipped: list[dict[str, str]]

    @classmethod
    def open(cls, path: str | Path) -> Run:
        """Read the rows of every trajectory under `path`; `FileNotFoundError` when it does not exist."""
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(f"{str(root)!r} does not exist: expected an ATIF trajectory file or a folder of them")
        candidates = [root] if root.is_file() else sorted(
            (file for file in root.rglob("*.json") if file.is_file()), key=lambda file: natural_key(str(file.relative_to(root))))
        files: list[Path] = []
        rows: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []
        for file in candidates:
            name = file.name if file == root else str(file.relative_to(root))
            try:
                row = {**summary(json.loads(file.read_bytes())), **harbor_trial(file)}
            except (OSError, ValueError) as exc:
                skipped.append({"file": name, "why": str(exc)})
                continue
            rows.append({"id": len(files), "file": name, **row})
            files.append(file)
        return cls(root, files, rows, skipped)

    def episode(self, index: int) -> atif.Trajectory:
        """Episode `index`, validated (`ReplayFileError` when it is not a valid trajectory)."""
        return read_trajectory(self.files[index])


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
        "has_tokens": any((step.get("metrics") or {}).get("completion_token_ids") for step in steps),
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
