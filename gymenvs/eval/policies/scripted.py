"""Scripted players for the envs whose state a policy can read from the conversation alone."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from gymenvs.eval.policies.base import Action, Messages, Policy


class WordlePlayer:
    """Guesses a word consistent with all feedback so far, from the shipped answer list."""

    name = "scripted"

    def __init__(self) -> None:
        self.candidates: tuple[str, ...] = _answers()
        self.last_guess: str | None = None

    def new_episode(self) -> WordlePlayer:
        return WordlePlayer()

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        from gymenvs.envs.wordle import _MARKS

        feedback = re.search(r"^([GY-](?: [GY-]){4})$", messages[-1]["content"], re.MULTILINE)
        if self.last_guess is not None and feedback:
            marks_of = {symbol: mark for mark, symbol in _MARKS.items()}
            marks = tuple(marks_of[symbol] for symbol in feedback.group(1).split())
            self.candidates = _partition(self.candidates, self.last_guess).get(marks, ())
        self.last_guess = self.candidates[0] if self.candidates else "crane"
        return {"name": "guess", "arguments": {"word": self.last_guess}}


@functools.cache
def _answers() -> tuple[str, ...]:
    from gymenvs.envs.wordle import load_word_list

    return tuple(word.lower() for word in load_word_list("wordle_answers") if len(word) == 5)


@functools.lru_cache(maxsize=1024)  # every episode starts from the same list and first guess: split it once
def _partition(candidates: tuple[str, ...], guess: str) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The candidates grouped by the feedback `guess` would get if each were the secret."""
    from gymenvs.envs.wordle import score_guess

    groups: dict[tuple[str, ...], list[str]] = {}
    for word in candidates:
        groups.setdefault(tuple(score_guess(guess, word)), []).append(word)
    return {marks: tuple(words) for marks, words in groups.items()}


class CatchPlayer:
    """Moves the paddle towards the ball's column, read from the board's last line."""

    name = "scripted"

    def new_episode(self) -> CatchPlayer:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        where = re.findall(r"ball: row \d+, column (\d+); paddle: column (\d+)", messages[-1]["content"])
        if not where:
            return {"name": "move", "arguments": {"direction": "stay"}}
        ball, paddle = map(int, where[-1])
        direction = "right" if ball > paddle else "left" if ball < paddle else "stay"
        return {"name": "move", "arguments": {"direction": direction}}


class EchoPlayer:
    """Sends the same message every turn."""

    name = "scripted"

    def new_episode(self) -> EchoPlayer:
        return self

    def act(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> Action:
        return {"name": "echo", "arguments": {"message": "hello"}}


SCRIPTED: dict[str, Callable[[], Policy]] = {
    "gymenvs/Wordle-v0": WordlePlayer,
    "gymenvs/Catch-v0": CatchPlayer,
    "gymenvs/Echo-v0": EchoPlayer,
}
