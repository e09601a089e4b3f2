"""GuessNumber: find a secret whole number; each guess is told "higher" or "lower"."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PositiveInt

from gymenvs.core import ActionError, Outcome, ResetOptionsError, TextEnv, ToolCall, tool, validate_config


class GuessNumberEnv(TextEnv):
    """Guess a secret number between 1 and `high`. Reward 1 when found; the episode is lost
    (truncated) at the turn limit. Tool: `guess(number)`; free text: a lone whole number.

    Args:
        high: the largest possible secret (2 to 1,000,000).
        max_turns: guesses allowed (default: enough for bisection, plus two).
        render_mode: None or "ansi".
    """

    reset_option_keys = frozenset({"secret"})  # reset(options={"secret": 7}) fixes the secret

    @validate_config  # a bad or unknown argument is a ValueError naming it, raised here
    def __init__(
        self,
        *,
        high: Annotated[int, Field(ge=2, le=1_000_000)] = 100,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns or high.bit_length() + 2, render_mode=render_mode)
        self.high = high
        self._secret = 0
        self._guesses: list[int] = []

    def _start_episode(self, options: dict[str, Any]) -> str:
        if "secret" in options:
            self._secret = self._checked_secret(options["secret"])
        else:  # all randomness from self.np_random: reset(seed=s) gives the same secret for the same s
            self._secret = int(self.np_random.integers(1, self.high + 1))
        self._guesses = []
        return f"I am thinking of a whole number from 1 to {self.high}. Guess it; I will say higher or lower."

    def _checked_secret(self, secret: Any) -> int:
        # A bad option value is the caller's mistake: ResetOptionsError (a ValueError) says so in one line,
        # and the vector env raises it in the caller instead of rebuilding its slots.
        if isinstance(secret, bool) or not isinstance(secret, int) or not 1 <= secret <= self.high:
            raise ResetOptionsError(f"reset option secret={secret!r}: expected a whole number from 1 to {self.high}")
        return secret

    def _parse_text(self, text: str) -> ToolCall:
        word = text.strip()
        if not word.isdigit():
            raise ActionError(f"expected a whole number, got {text[:40]!r}")
        return ToolCall("guess", {"number": int(word)})

    @tool
    def guess(self, number: int) -> Outcome:
        """Guess the secret number.

        Args:
            number: Your guess, from 1 to the largest possible secret.
        """
        if not 1 <= number <= self.high:
            raise ActionError(f"{number} is out of range: guess from 1 to {self.high}")  # the agent reads this
        self._guesses.append(number)
        if number == self._secret:
            return Outcome(f"{number} is right!", reward=1.0, terminated=True)
        return Outcome(f"{number}: {'higher' if number < self._secret else 'lower'}.")

    def _episode_state(self) -> dict[str, Any]:  # what state() adds: JSON-serializable
        return {"high": self.high, "secret": self._secret, "guesses": list(self._guesses)}

    def _render_ansi(self) -> str:
        return f"guesses: {self._guesses}"
