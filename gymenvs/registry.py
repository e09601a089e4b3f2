"""Registers every gymenvs environment with gymnasium under the `gymenvs/` namespace.

Entry points are strings, so registering imports no env module: `gymnasium.make` imports
the one it builds (and its heavy dependencies) on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry("gymenvs/Echo-v0", "gymenvs.envs.echo:EchoEnv", "Echoes a message back; per-step sleep and CPU knobs for benchmarks."),
    EnvEntry(
        "gymenvs/ReasoningGym-v0",
        "gymenvs.envs.reasoning:ReasoningGymEnv",
        "One reasoning_gym question per episode (any dataset or a composite), scored by the dataset.",
    ),
    EnvEntry("gymenvs/Wordle-v0", "gymenvs.envs.wordle:WordleEnv", "Find the hidden five-letter word in six guesses."),
    EnvEntry("gymenvs/Sudoku-v0", "gymenvs.envs.sudoku:SudokuEnv", "Solve a generated 9x9 Sudoku with a unique solution."),
    EnvEntry("gymenvs/Catch-v0", "gymenvs.envs.catch:CatchEnv", "Move a paddle left, stay or right to catch a falling ball."),
    EnvEntry(
        "gymenvs/SWE-v0",
        "gymenvs.swe.env:SWEEnv",
        "Fix a repository's issue in a Docker container; graded host-side by its FAIL_TO_PASS / PASS_TO_PASS tests.",
    ),
)


def register_envs() -> None:
    for entry in ENVS:
        if entry.id not in gym.registry:
            gym.register(entry.id, entry_point=entry.entry_point)


def list_envs() -> list[str]:
    """The ids of every gymenvs environment, for `gymnasium.make`."""
    return [entry.id for entry in ENVS]


def describe_envs() -> dict[str, str]:
    """Each env id with its one-line description."""
    return {entry.id: entry.description for entry in ENVS}
