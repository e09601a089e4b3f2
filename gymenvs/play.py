"""`gymenvs play`: one episode in the terminal, typed by a person.

In a terminal the prompt has line editing and a history (the standard library's `readline`: arrows,
Ctrl-R, Tab completes the `:` commands), kept between sessions in `history_path()`. Ctrl-D ends the
session (exit code 0), Ctrl-C too (exit code 130, as for any program a SIGINT stops), both without
a traceback. `:state` prints the env's `state()` with nested values indented and grids (a list of
equal-length rows of numbers, booleans or letters) drawn as grids.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

COMMANDS = (":tools", ":state", ":help", ":quit")
HELP = 'Type an action: free text, a tool call as JSON, or ":tools", ":state", ":help", ":quit" (Ctrl-D quits too).'
HISTORY_LENGTH = 1000
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program stopped by Ctrl-C


def play_episode(env: Any, seed: int | None, *, out: TextIO | None = None) -> int:
    """Play one episode of `env` on the terminal; the exit code (0, or 130 after Ctrl-C)."""
    out = out or sys.stdout
    read_line = line_reader()
    try:
        return _play(env, seed, read_line, out)
    except KeyboardInterrupt:
        print("\n[interrupted]", file=out)
        return EXIT_INTERRUPTED
    except EOFError:
        print(file=out)
        return 0


def _play(env: Any, seed: int | None, read_line: Callable[[str], str], out: TextIO) -> int:
    observation, info = env.reset(seed=seed)
    tools = info.get("tools", [])
    print(observation, file=out)
    print_tools(tools, out)
    print(HELP, file=out)
    total = 0.0
    while True:
        line = read_line("> ")
        command = line.strip()
        if command == ":quit":
            return 0
        if command == ":tools":
            print_tools(tools, out)
            continue
        if command == ":help":
            print(HELP, file=out)
            continue
        if command == ":state":
            print(format_state(env.unwrapped.state()), file=out)
            continue
        observation, reward, terminated, truncated, _ = env.step(line)
        total += reward
        print(observation, file=out)
        if reward:
            print(f"[reward {reward:+g}]", file=out)
        if terminated or truncated:
            print(f"Episode over ({'terminated' if terminated else 'truncated'}); return {total:g}.", file=out)
            return 0


def print_tools(tools: list[dict[str, Any]], out: TextIO) -> None:
    for schema in tools:
        function = schema["function"]
        params = ", ".join(function["parameters"].get("properties", {}))
        print(f"  tool {function['name']}({params}): {function['description']}", file=out)


# -- the prompt ------------------------------------------------------------------------------


def history_path() -> Path | None:
    """Where the prompt's history is kept: `$GYMENVS_PLAY_HISTORY` (empty: nowhere), else
    `$XDG_STATE_HOME/gymenvs/play_history` (`~/.local/state` when unset)."""
    configured = os.environ.get("GYMENVS_PLAY_HISTORY")
    if configured is not None:
        return Path(configured).expanduser() if configured else None
    state_home = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state_home) / "gymenvs" / "play_history"


def line_reader() -> Callable[[str], str]:
    """`input`, with `readline`'s editing, history and completion when stdin is a terminal.

    Off a terminal (a pipe, a file) it stays plain `input`: readline would echo its control sequences
    into the output there. On Windows, where there is no `readline`, the prompt has no history.
    """
    if not sys.stdin.isatty():
        return input
    try:
        import readline
    except ImportError:
        return input
    readline.set_completer(_complete)
    readline.set_completer_delims(" \t\n")
    readline.parse_and_bind("tab: complete")
    path = history_path()
    if path is not None:
        _load_history(readline, path)
    return _with_history_saved(readline, path)


def _complete(text: str, state: int) -> str | None:
    matches = [command for command in COMMANDS if command.startswith(text)]
    return matches[state] if state < len(matches) else None


def _load_history(readline: Any, path: Path) -> None:
    readline.set_history_length(HISTORY_LENGTH)
    try:
        readline.read_history_file(path)
    except OSError:  # the first session (no file yet), or an unreadable file: start empty
        pass


def _with_history_saved(readline: Any, path: Path | None) -> Callable[[str], str]:
    """`input` that writes the history after each line, so an interrupted session keeps it too."""

    def read_line(prompt: str) -> str:
        line = input(prompt)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(path)
            except OSError:  # a read-only home: the session goes on without a saved history
                pass
        return line

    return read_line


# -- :state ----------------------------------------------------------------------------------

INDENT = "  "
_CELL_TYPES = (bool, int, float, str)


def format_state(state: Any) -> str:
    """`state` as indented JSON-like text, with every grid drawn as rows of aligned cells."""
    return "\n".join(_format(state, 0))


def _format(value: Any, depth: int) -> list[str]:
    pad = INDENT * depth
    if isinstance(value, dict) and value:
        lines = ["{"]
        for index, (key, item) in enumerate(value.items()):
            body = _format(item, depth + 1)
            lines.extend(_with_comma([f"{pad}{INDENT}{json.dumps(str(key))}: {body[0].lstrip()}", *body[1:]], index, len(value)))
        return [*lines, pad + "}"]
    if is_grid(value):
        header = f"{pad}[  ({len(value)}x{len(value[0])} grid{_legend(value)})"
        return [header, *(f"{pad}{INDENT}{row}" for row in grid_rows(value)), pad + "]"]
    if isinstance(value, list | tuple) and value and not all(_is_short_scalar(item) for item in value):
        lines = ["["]
        for index, item in enumerate(value):
            body = _format(item, depth + 1)
            lines.extend(_with_comma([f"{pad}{INDENT}{body[0].lstrip()}", *body[1:]], index, len(value)))
        return [*lines, pad + "]"]
    if isinstance(value, str) and "\n" in value:  # a text of several lines reads best as its lines
        return [pad + "|", *(f"{pad}{INDENT}{line}".rstrip() for line in value.rstrip("\n").split("\n"))]
    return [pad + json.dumps(value, default=str)]


def _with_comma(lines: list[str], index: int, count: int) -> list[str]:
    """An item's lines, with a comma after them unless it is the last item (or a block of text, which reads on)."""
    return lines if index == count - 1 or lines[0].endswith("|") else [*lines[:-1], lines[-1] + ","]


def is_grid(value: Any) -> bool:
    """A list of equal-length rows (at least two cells each) of numbers, booleans or single letters."""
    if not isinstance(value, list | tuple) or not value:
        return False
    if not all(isinstance(row, list | tuple) and len(row) == len(value[0]) >= 2 for row in value):
        return False
    cells = [cell for row in value for cell in row]
    return all(isinstance(cell, _CELL_TYPES) and (not isinstance(cell, str) or len(cell) <= 1) for cell in cells)


def grid_rows(grid: list[list[Any]]) -> list[str]:
    cells = [[_cell_text(cell) for cell in row] for row in grid]
    width = max(len(cell) for row in cells for cell in row)
    return [" ".join(cell.rjust(width) for cell in row) for row in cells]


def _cell_text(cell: Any) -> str:
    if isinstance(cell, bool):
        return "#" if cell else "."
    return str(cell) if cell != "" else "."


def _legend(grid: list[list[Any]]) -> str:
    return ": # true, . false" if any(isinstance(cell, bool) for row in grid for cell in row) else ""


def _is_short_scalar(value: Any) -> bool:
    return value is None or (isinstance(value, _CELL_TYPES) and len(str(value)) <= 40)
