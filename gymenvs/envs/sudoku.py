"""Sudoku: fill a 9x9 grid so every row, column and 3x3 box holds the digits 1 to 9 once."""

from __future__ import annotations

import re
from typing import Any, Literal

import numpy as np
from pydantic import PositiveInt

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, tool, validate_config

Grid = list[list[int]]  # 0 = empty
CLUES = {"easy": 40, "medium": 32, "hard": 26}
_ALL_DIGITS = 0b1111111110  # bits 1..9
_PLACEMENT = re.compile(r"^\D*(\d)\D+(\d)\D+(\d)\D*$")


def box_of(row: int, col: int) -> int:
    return (row // 3) * 3 + col // 3


def random_solution(rng: np.random.Generator) -> Grid:
    """A uniformly shuffled valid grid: a base pattern under digit, row, column and band permutations."""
    digits = rng.permutation(9) + 1
    rows = [3 * band + r for band in rng.permutation(3) for r in rng.permutation(3)]
    cols = [3 * stack + c for stack in rng.permutation(3) for c in rng.permutation(3)]
    pattern = [[(3 * (r % 3) + r // 3 + c) % 9 for c in cols] for r in rows]
    grid = [[int(digits[v]) for v in line] for line in pattern]
    return [list(col) for col in zip(*grid)] if rng.integers(2) else grid


def has_other_solution(grid: Grid, solution: Grid) -> bool:
    """Whether `grid` can be completed in any way other than `solution` (depth-first, fewest candidates first)."""
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    empty = []
    for r in range(9):
        for c in range(9):
            d = grid[r][c]
            if d:
                bit = 1 << d
                rows[r] |= bit
                cols[c] |= bit
                boxes[box_of(r, c)] |= bit
            else:
                empty.append((r, c))

    def search(cells: list[tuple[int, int]], differs: bool) -> bool:
        if not cells:
            return differs
        best, best_free = 0, None
        for i, (r, c) in enumerate(cells):
            free = _ALL_DIGITS & ~(rows[r] | cols[c] | boxes[box_of(r, c)])
            if best_free is None or free.bit_count() < best_free.bit_count():
                best, best_free = i, free
                if free.bit_count() <= 1:
                    break
        r, c = cells[best]
        rest = cells[:best] + cells[best + 1 :]
        free = best_free or 0  # cells is not empty: best_free is set
        while free:
            bit = free & -free
            free ^= bit
            d = bit.bit_length() - 1
            rows[r] |= bit
            cols[c] |= bit
            boxes[box_of(r, c)] |= bit
            found = search(rest, differs or d != solution[r][c])
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[box_of(r, c)] ^= bit
            if found:
                return True
        return False

    return search(empty, False)


def make_puzzle(rng: np.random.Generator, clues: int) -> tuple[Grid, Grid]:
    """A puzzle with a unique solution and as close to `clues` givens as removal allows."""
    solution = random_solution(rng)
    puzzle = [line[:] for line in solution]
    filled = 81
    for index in rng.permutation(81):
        if filled <= clues:
            break
        r, c = divmod(int(index), 9)
        puzzle[r][c] = 0
        if has_other_solution(puzzle, solution):
            puzzle[r][c] = solution[r][c]
        else:
            filled -= 1
    return puzzle, solution


class SudokuEnv(TextEnv):
    """Sudoku-v0. Rows and columns are numbered 1 to 9. A move that breaks a rule (a given cell, a digit
    already in the row, column or box) is rejected with the reason. Reward 1 when the grid is full;
    the episode is truncated (lost) at the turn limit. Free text: three digits, as `row col digit`.

    Args:
        difficulty: "easy" (40 givens), "medium" (32) or "hard" (about 26).
        max_turns: turns allowed, rejected moves included.
        render_mode: None or "ansi".
    """

    default_max_turns = 100

    @validate_config
    def __init__(
        self,
        *,
        difficulty: Literal["easy", "medium", "hard"] = "easy",
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.difficulty = difficulty
        self._puzzle: Grid = []
        self._solution: Grid = []
        self._board: Grid = []

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._puzzle, self._solution = make_puzzle(self.np_random, CLUES[self.difficulty])
        self._board = [line[:] for line in self._puzzle]
        return (
            "Fill the grid so every row, column and 3x3 box holds 1-9 once. Place digits with "
            f"place(row, col, digit); rows and columns are numbered 1-9.\n{self._grid_text()}"
        )

    def _parse_text(self, text: str) -> ToolCall:
        match = _PLACEMENT.match(text.strip())
        if not match:
            raise ActionError(f"write a move as three numbers, row col digit (e.g. 3 7 5); got {text[:60]!r}")
        row, col, digit = (int(g) for g in match.groups())
        return ToolCall("place", {"row": row, "col": col, "digit": digit})

    @tool
    def place(self, row: int, col: int, digit: int) -> Outcome:
        """Write a digit in an empty or previously filled cell.

        Args:
            row: Row number, 1 to 9 from the top.
            col: Column number, 1 to 9 from the left.
            digit: The digit to write, 1 to 9.
        """
        for name, value in (("row", row), ("col", col), ("digit", digit)):
            if not 1 <= value <= 9:
                raise ActionError(f"{name} must be between 1 and 9, got {value}")
        r, c = row - 1, col - 1
        if self._puzzle[r][c]:
            raise ActionError(f"cell ({row}, {col}) is a given ({self._puzzle[r][c]}) and cannot change")
        conflict = self._conflict(r, c, digit)
        if conflict:
            raise ActionError(f"{digit} is already in {conflict}")
        self._board[r][c] = digit
        if all(all(line) for line in self._board):
            return Outcome(f"{self._grid_text()}\nSolved!", reward=1.0, terminated=True)
        empty = sum(line.count(0) for line in self._board)
        return Outcome(f"{self._grid_text()}\n{empty} cells left.")

    def _conflict(self, r: int, c: int, digit: int) -> str | None:
        if any(self._board[r][j] == digit for j in range(9) if j != c):
            return f"row {r + 1}"
        if any(self._board[i][c] == digit for i in range(9) if i != r):
            return f"column {c + 1}"
        br, bc = 3 * (r // 3), 3 * (c // 3)
        if any(self._board[i][j] == digit for i in range(br, br + 3) for j in range(bc, bc + 3) if (i, j) != (r, c)):
            return f"the 3x3 box of ({r + 1}, {c + 1})"
        return None

    def _grid_text(self) -> str:
        lines = ["    1 2 3   4 5 6   7 8 9"]
        for r, line in enumerate(self._board):
            if r in (3, 6):
                lines.append("    ------+-------+------")
            cells = [str(d) if d else "." for d in line]
            lines.append(f"{r + 1}   " + " | ".join(" ".join(cells[k : k + 3]) for k in (0, 3, 6)))
        return "\n".join(lines)

    def _episode_state(self) -> dict[str, Any]:
        return {"puzzle": self._puzzle, "board": self._board, "solution": self._solution, "difficulty": self.difficulty}

    def _render_ansi(self) -> str:
        return self._grid_text()
