"""`gymenvs play` in a real terminal (a pty), typed as a person types: editing keys, the history,
Tab, Ctrl-C and Ctrl-D, and what `:state` prints."""

import os
import sys

import pexpect
import pytest
from keyboard_support import ctrl_c_as_in_a_terminal

from gymenvs.play import format_state, history_path

UP, LEFT, BACKSPACE = "\x1b[A", "\x1b[D", "\x7f"
PROMPT = "\r\n> "


@pytest.fixture
def terminal(tmp_path):
    """Start `gymenvs play ...` in a pty; every session of one test shares one history file."""
    sessions = []

    def start(*args):
        env = {**os.environ, "TERM": "xterm", "INPUTRC": os.devnull, "GYMENVS_PLAY_HISTORY": str(tmp_path / "history")}
        child = pexpect.spawn(
            sys.executable, ["-m", "gymenvs.cli", "play", *args], env=env, encoding="utf-8", timeout=60, dimensions=(40, 200),
            preexec_fn=ctrl_c_as_in_a_terminal,
        )
        sessions.append(child)
        child.expect_exact(PROMPT)
        return child

    yield start
    for child in sessions:
        child.close(force=True)


def ended(child):
    """The exit code and everything printed after the last `expect`, once the session is over."""
    child.expect(pexpect.EOF)
    rest = child.before
    child.close()
    assert "Traceback" not in rest, rest
    return child.exitstatus, rest


def test_editing_keys_history_and_tab_completion(terminal):
    child = terminal("gymenvs/Wordle-v0", "--seed", "0")
    child.send("[craxe]" + LEFT * 2 + BACKSPACE + "n\r")  # cursor back to "[crax|e]": delete the x, type n
    child.expect_exact("C R A N E")
    child.expect_exact(PROMPT)
    child.send(UP + "\r")  # the same guess again, from the history
    child.expect_exact("C R A N E")
    child.expect_exact(PROMPT)
    child.send(":sta\t\r")  # Tab completes the command
    child.expect_exact('"marks": [  (2x5 grid)\r\n    - - - - -\r\n    - - - - -\r\n  ],')
    child.expect_exact(PROMPT)
    child.sendeof()
    assert ended(child)[0] == 0


def test_the_history_outlives_the_session(terminal):
    first = terminal("gymenvs/Wordle-v0", "--seed", "0")
    first.send("[slate]\r")
    first.expect_exact("S L A T E")
    first.expect_exact(PROMPT)
    first.sendeof()
    assert ended(first)[0] == 0
    second = terminal("gymenvs/Wordle-v0", "--seed", "0")
    second.send(UP + "\r")
    second.expect_exact("S L A T E")


def test_ctrl_c_ends_the_session_without_a_traceback(terminal):
    child = terminal("gymenvs/Catch-v0", "--seed", "0")
    child.send("half a li")
    child.expect_exact("half a li")  # as a person sees the echo first (a ^C sent with the keys was lost once in a full run)
    child.sendintr()
    code, rest = ended(child)
    assert code == 130 and "[interrupted]" in rest


def test_ctrl_d_on_an_empty_line_ends_the_session(terminal):
    child = terminal("gymenvs/Catch-v0", "--seed", "0")
    child.sendeof()
    code, rest = ended(child)
    assert code == 0 and "interrupted" not in rest


def test_state_draws_a_sudoku_as_a_grid(terminal):
    child = terminal("gymenvs/Sudoku-v0", "--seed", "0")
    child.send(":state\r")
    child.expect_exact('"board": [  (9x9 grid)\r\n')
    rows = [child.readline().strip() for _ in range(10)]
    assert all(len(row.split()) == 9 for row in rows[:9]) and rows[9] == "],"
    child.sendline(":quit")
    assert ended(child)[0] == 0


def test_format_state_indents_nested_values_and_draws_boolean_grids():
    state = {"game": "LightsOut-v0", "game_state": {"grid": [[True, False], [False, True]], "moves": [1, 2]}, "text": "a\nb"}
    assert format_state(state).splitlines() == [
        "{",
        '  "game": "LightsOut-v0",',
        '  "game_state": {',
        '    "grid": [  (2x2 grid: # true, . false)',
        "      # .",
        "      . #",
        "    ],",
        '    "moves": [1, 2]',
        "  },",
        '  "text": |',
        "    a",
        "    b",
        "}",
    ]


def test_the_history_lives_under_xdg_state_home_unless_told_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv("GYMENVS_PLAY_HISTORY", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert history_path() == tmp_path / "gymenvs" / "play_history"
    monkeypatch.setenv("GYMENVS_PLAY_HISTORY", "")
    assert history_path() is None
