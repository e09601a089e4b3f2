"""Trajectory files: one ATIF trajectory per episode, one JSON file each, named after the env and the seed.

`write_trajectory` names a file `<env>-seed<seed>.json` (`Wordle-v0-seed3.json`; the episode's id
instead of the seed when it had none, `-2`, `-3`... when the name is taken: a file is never
overwritten). `read_trajectories` reads one file, or every `*.json` of a folder in name order, numbers
compared as numbers (so seed 2 comes before seed 10): the order `gymenvs replay --episode N` counts in.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import atif
import pydantic

from gymenvs.core.errors import ReplayFileError, short_repr
from gymenvs.trajectories.recorder import EXTRA_KEY

#: What `schema_version` of a file read must start with: the versions whose models `atif` holds.
SCHEMA_PREFIX = "ATIF-v1."
_UNSAFE = re.compile(r"[^\w.-]+")
_SHOWN = 3  # problems named in an error message


def write_trajectory(trajectory: atif.Trajectory, directory: str | Path) -> Path:
    """Write `trajectory` as JSON (`model_dump_json(exclude_none=True)`, indented) into `directory`, made if missing,
    under a new name (see the module docstring); the file's path."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    text = trajectory.model_dump_json(exclude_none=True, indent=2) + "\n"
    stem = file_stem(trajectory)
    for number in itertools.count(1):
        path = folder / (f"{stem}.json" if number == 1 else f"{stem}-{number}.json")
        try:
            with open(path, "x", encoding="utf-8") as file:  # "x": two writers never share a name
                file.write(text)
            return path
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def file_stem(trajectory: atif.Trajectory) -> str:
    """`<env>-seed<seed>`, or `<env>-<episode id>`; the agent's name for a trajectory that names no env."""
    episode = (trajectory.extra or {}).get(EXTRA_KEY, {})
    env = str(episode.get("env_id") or trajectory.agent.name).rsplit("/", 1)[-1]
    seed = episode.get("seed")
    which = f"seed{seed}" if seed is not None else str(episode.get("episode_id") or trajectory.session_id or "episode")
    return _UNSAFE.sub("_", f"{env}-{which}")


def read_trajectories(path: str | Path) -> list[atif.Trajectory]:
    """The trajectories of one ATIF file, or of every `*.json` file of a folder (in name order, numbers as numbers).

    A file that cannot be read, is not JSON or is not an ATIF trajectory is a `ReplayFileError` (a `ValueError`)
    naming it and saying what is wrong.
    """
    path = Path(path)
    if not path.is_dir():
        return [read_trajectory(path)]
    files = sorted((file for file in path.glob("*.json") if file.is_file()), key=lambda file: natural_key(file.name))
    if not files:
        raise ReplayFileError(f"folder {str(path)!r} holds no trajectory files (*.json), as `gymenvs eval --trajectories` "
                              "writes them")
    return [read_trajectory(file) for file in files]


def read_trajectory(path: Path) -> atif.Trajectory:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayFileError(f"cannot read trajectory file {str(path)!r}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplayFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); expected one ATIF "
                              "trajectory, as `gymenvs eval --trajectories` writes") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, str) and not version.startswith(SCHEMA_PREFIX):
        raise ReplayFileError(f"{path}: schema_version {version!r}: expected an ATIF v1 trajectory ({SCHEMA_PREFIX}x)")
    try:
        return atif.Trajectory.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ReplayFileError(f"{path}: not an ATIF trajectory: {_problems(exc)}") from None


def _problems(exc: pydantic.ValidationError) -> str:
    errors = exc.errors(include_url=False)
    missing = [_where(error) for error in errors if error["type"] == "missing"]
    others = [f"{_where(error)}={short_repr(error['input'])}: {_message(error)}" if error["loc"] else _message(error)
              for error in errors if error["type"] != "missing"]
    problems = ([f"missing field(s) {', '.join(missing)}"] if missing else []) + others
    return "; ".join(problems[:_SHOWN]) + (f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else "")


def _message(error: Any) -> str:
    message = error["msg"].removeprefix("Value error, ")  # a model validator's own ValueError says it all
    return message[:1].lower() + message[1:]


def _where(error: Any) -> str:
    return ".".join(map(str, error["loc"]))


def natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
