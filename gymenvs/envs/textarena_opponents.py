"""Opponent policies for the other seats of a TextArena game: random, scripted, or any callable.

A policy is a callable that takes the observation text its seat receives (the game's messages
since that seat last moved) and returns the move text, which the game parses as it parses an
agent's (e.g. `"[4]"`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

Policy = Callable[[str], str]

#: A move the game offers in brackets, e.g. `'[4]'` in "Available Moves: '[0]', '[4]'".
_BRACKETED_MOVE = re.compile(r"\[[^\[\]\n]{1,24}\]")
#: Where one message of an observation starts: a line opening with its sender's tag, e.g. `[GAME] `.
_MESSAGE_START = re.compile(r"^\[[^\]\n]+\] ", re.MULTILINE)


class RandomOpponent:
    """Plays a move drawn uniformly from the bracketed moves the game lists in its latest message
    (TicTacToe, ConnectFour, Nim and many others list them); `[0]` when it lists none. It draws from
    the env's own random generator, so the same seed gives the same opponent."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def __call__(self, observation: str) -> str:
        starts = [match.end() for match in _MESSAGE_START.finditer(observation)] or [0]
        ends = [match.start() for match in _MESSAGE_START.finditer(observation)][1:] + [len(observation)]
        for start, end in reversed(list(zip(starts, ends))):
            moves = sorted(set(_BRACKETED_MOVE.findall(observation[start:end])))
            if moves:
                return moves[int(self.rng.integers(len(moves)))]
        return "[0]"


class ScriptedOpponent:
    """Plays the given moves in order; once they run out it repeats the last one."""

    def __init__(self, moves: Sequence[str]):
        if not moves or not all(isinstance(move, str) for move in moves):
            raise ValueError(f"opponent={list(moves)!r}: a scripted opponent needs at least one move, each a string")
        self.moves = list(moves)
        self.played = 0

    def __call__(self, observation: str) -> str:
        move = self.moves[min(self.played, len(self.moves) - 1)]
        self.played += 1
        return move


def build_opponent(spec: str | Sequence[str] | Policy, rng: np.random.Generator) -> Policy:
    """The policy for `TextArenaEnv(opponent=spec)`, fresh for each episode."""
    if spec == "random":
        return RandomOpponent(rng)
    if isinstance(spec, str):
        raise ValueError(f"opponent={spec!r}: allowed are 'random', a list of moves, or a callable(observation) -> move")
    if callable(spec):
        return spec
    return ScriptedOpponent(spec)
