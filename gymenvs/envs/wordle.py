"""Wordle: find the hidden five-letter word in six guesses, with per-letter feedback."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Annotated, Any

from pydantic import Field, PositiveInt

from gymenvs.core import ActionError, Outcome, ResetOptionsError, TextEnv, ToolCall, tool, validate_config

WORD_LENGTH = 5
_BRACKETED = re.compile(r"\[([A-Za-z]+)\]")
_MARKS = {"correct": "G", "present": "Y", "absent": "-"}


@cache
def load_word_list(name: str) -> tuple[str, ...]:
    """A word list shipped in `gymenvs/envs/data/` (`wordle_answers` or `wordle_guesses`)."""
    text = resources.files("gymenvs.envs").joinpath(f"data/{name}.txt").read_text(encoding="utf-8")
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def score_guess(guess: str, secret: str) -> list[str]:
    """Per letter: "correct" (right place), "present" (elsewhere in the word) or "absent".

    A repeated letter is marked present only as often as it occurs in the secret beyond its exact matches.
    """
    marks = ["absent"] * len(guess)
    unmatched = Counter(s for g, s in zip(guess, secret) if g != s)
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            marks[i] = "correct"
        elif unmatched[g] > 0:
            marks[i] = "present"
            unmatched[g] -= 1
    return marks


class WordleEnv(TextEnv):
    """Wordle-v0. Feedback marks each letter G (right place), Y (in the word elsewhere) or - (absent).
    Reward 1 for solving, 0 otherwise; `info` carries shaped signals: `greens`, `yellows` (fractions of
    the word), `repeated` (a guess made before) and `solved`. Invalid guesses (wrong length, unknown
    word) cost a turn but not a guess. Free text: the last `[word]` in brackets, or a lone word.

    Args:
        words: possible secret words (default: the shipped list of common five-letter words).
        max_guesses: guesses before the game is lost.
        allow_any_guess: accept any five letters as a guess, not only dictionary words.
        max_turns: turns allowed, invalid guesses included.
        render_mode: None or "ansi".
    """

    default_max_turns = 12
    reset_option_keys = frozenset({"secret"})

    @validate_config
    def __init__(
        self,
        *,
        words: Sequence[str] | None = None,
        max_guesses: Annotated[int, Field(ge=1, le=20)] = 6,
        allow_any_guess: bool = False,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.answers = tuple(_checked_word(w) for w in words) if words is not None else load_word_list("wordle_answers")
        if not self.answers:
            raise ValueError("words=[]: expected at least one five-letter word")
        self.allowed_guesses = frozenset(load_word_list("wordle_guesses")) | frozenset(self.answers)
        self.max_guesses = max_guesses
        self.allow_any_guess = allow_any_guess
        self._secret = ""
        self._guesses: list[tuple[str, list[str]]] = []

    def _start_episode(self, options: dict[str, Any]) -> str:
        if "secret" in options:
            self._secret = _checked_secret(options["secret"])
        else:
            self._secret = self.answers[int(self.np_random.integers(len(self.answers)))]
        self._guesses = []
        return (
            f"Guess the hidden {WORD_LENGTH}-letter word in {self.max_guesses} tries. After each guess every letter is "
            "marked G (right letter, right place), Y (in the word, elsewhere) or - (not in the word)."
        )

    def _parse_text(self, text: str) -> ToolCall:
        bracketed = _BRACKETED.findall(text)
        words = bracketed[-1:] or text.split()
        if len(words) != 1:
            raise ActionError(f"write your guess as one word or in brackets like [crane]; got {text[:60]!r}")
        return ToolCall("guess", {"word": words[0]})

    @tool
    def guess(self, word: str) -> Outcome:
        """Guess the hidden word.

        Args:
            word: A five-letter English word.
        """
        word = word.strip().lower()
        if len(word) != WORD_LENGTH or not word.isascii() or not word.isalpha():
            raise ActionError(f"{word[:40]!r} is not a {WORD_LENGTH}-letter word; this guess did not count")
        if not self.allow_any_guess and word not in self.allowed_guesses:
            raise ActionError(f"{word!r} is not in the word list; this guess did not count")
        repeated = any(word == previous for previous, _ in self._guesses)
        marks = score_guess(word, self._secret)
        self._guesses.append((word, marks))
        solved = word == self._secret
        lost = not solved and len(self._guesses) >= self.max_guesses
        info = {
            "greens": marks.count("correct") / WORD_LENGTH,
            "yellows": marks.count("present") / WORD_LENGTH,
            "repeated": repeated,
            "solved": solved,
        }
        text = self._feedback(word, marks)
        if solved:
            text += f"\nSolved in {len(self._guesses)} guesses!"
        elif lost:
            text += f"\nOut of guesses. The word was {self._secret!r}."
        else:
            text += f"\n{self.max_guesses - len(self._guesses)} guesses left."
        return Outcome(text, reward=1.0 if solved else 0.0, terminated=solved or lost, info=info)

    @staticmethod
    def _feedback(word: str, marks: list[str]) -> str:
        return f"{' '.join(word.upper())}\n{' '.join(_MARKS[m] for m in marks)}"

    def _episode_state(self) -> dict[str, Any]:
        return {
            "secret": self._secret,
            "guesses": [word for word, _ in self._guesses],
            "marks": [[_MARKS[mark] for mark in marks] for _, marks in self._guesses],  # G, Y, - per letter, a row per guess
            "max_guesses": self.max_guesses,
        }

    def _render_ansi(self) -> str:
        rows = [self._feedback(word, marks) for word, marks in self._guesses]
        return "\n".join(rows) if rows else "(no guesses yet)"


def _checked_secret(word: Any) -> str:
    try:
        return _checked_word(word)
    except ValueError:
        raise ResetOptionsError(f"reset option secret={word!r}: expected a {WORD_LENGTH}-letter word of ASCII letters") from None


def _checked_word(word: Any) -> str:
    if not isinstance(word, str) or len(word) != WORD_LENGTH or not word.isascii() or not word.isalpha():
        raise ValueError(f"word {word!r}: expected a {WORD_LENGTH}-letter word of ASCII letters")
    return word.lower()
