"""Catch: a ball falls down a small grid; move the paddle on the bottom row to catch it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, tool, validate_config

Direction = Literal["left", "stay", "right"]
_SHIFT = {"left": -1, "stay": 0, "right": 1}


class CatchEnv(TextEnv):
    """Catch-v0. Each valid move shifts the paddle and drops the ball one row. When the ball reaches
    the bottom row the episode ends with +1 (caught) or -1 (missed). Tools: `move(direction)` and
    `stay()` (as TRL's Catch prompts name it). Free text must be exactly one of `left`, `stay`,
    `right` (case and surrounding space ignored); anything else is rejected and the ball does not move.

    Args:
        rows: grid height (the ball needs rows - 1 moves to land).
        columns: grid width.
        max_turns: turns allowed, invalid ones included (default: three times the rows).
        render_mode: None or "ansi".
    """

    @validate_config
    def __init__(
        self,
        *,
        rows: Annotated[int, Field(ge=2, le=50)] = 10,
        columns: Annotated[int, Field(ge=2, le=50)] = 5,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns or 3 * rows, render_mode=render_mode)
        self.rows = rows
        self.columns = columns
        self._ball_row = self._ball_column = self._paddle = 0

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._ball_row = 0
        self._ball_column = int(self.np_random.integers(self.columns))
        self._paddle = self.columns // 2
        return (
            f"A ball falls one row per move on a {self.rows}x{self.columns} grid. Catch it with your paddle (=) "
            f"on the bottom row: move left, stay or right.\n{self._board()}"
        )

    def _parse_text(self, text: str) -> ToolCall:
        word = text.strip().lower()
        if word not in _SHIFT:
            raise ActionError(f"expected one of left, stay, right; got {text[:40]!r}")
        return ToolCall("move", {"direction": word})

    @tool
    def move(self, direction: Direction) -> Outcome:
        """Move the paddle one column, or keep it where it is.

        Args:
            direction: Where to move the paddle.
        """
        target = self._paddle + _SHIFT[direction]
        self._paddle = min(max(target, 0), self.columns - 1)
        self._ball_row += 1
        if self._ball_row < self.rows - 1:
            return Outcome(self._board())
        caught = self._paddle == self._ball_column
        verdict = "Caught the ball! +1" if caught else "Missed the ball. -1"
        return Outcome(f"{self._board()}\n{verdict}", reward=1.0 if caught else -1.0, terminated=True, info={"caught": caught})

    @tool
    def stay(self) -> Outcome:
        """Keep the paddle where it is while the ball falls one row (the same as move("stay"))."""
        return self.move("stay")

    def _board(self) -> str:
        lines = []
        for row in range(self.rows):
            cells = ["."] * self.columns
            if row == self.rows - 1:
                cells[self._paddle] = "="
            if row == self._ball_row:
                cells[self._ball_column] = "o" if cells[self._ball_column] == "." else "@"
            lines.append("".join(cells))
        where = f"ball: row {self._ball_row + 1}, column {self._ball_column + 1}; paddle: column {self._paddle + 1}"
        return "\n".join(lines) + "\n" + where

    def _episode_state(self) -> dict[str, Any]:
        return {"ball": [self._ball_row, self._ball_column], "paddle": self._paddle, "rows": self.rows, "columns": self.columns}

    def _render_ansi(self) -> str:
        return self._board()
