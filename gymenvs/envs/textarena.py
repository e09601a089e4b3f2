"""TextArena: any game of the `textarena` package (100+ text games) as a gymenvs env.

`gymnasium.make("gymenvs/TextArena-v0", game="TowerOfHanoi-v0")`. The agent plays one seat; the
other seats (two-player and multi-player games) are played by an opponent policy.

TextArena games draw from Python's global `random` module, which every thread shares (and which
textarena reseeds at each reset). Inside textarena's modules the name `random` is therefore pointed
at `GAME_RANDOM`, which sends each call to the generator of the game that the current thread is
running (and to the global one when none is). Each game has its own generator, so games in
different threads (a thread-backend vector env) neither disturb nor desynchronise each other, and
code outside textarena keeps its global `random` stream.
"""

from __future__ import annotations

import inspect
import json
import random
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import NonNegativeInt, PositiveInt

from gymenvs.core import Outcome, TextEnv, ToolCall, tool, validate_config
from gymenvs.envs.optional import require
from gymenvs.envs.textarena_opponents import Policy, build_opponent

#: Moves the opponents may make in a row before the agent's turn comes back (a game stuck on an
#: opponent's invalid moves must not hang the env).
MAX_OPPONENT_MOVES = 200
_GAME_ID = -1  # textarena.GAME_ID: the sender of the game's own messages


class _GameRandom:
    """Stands in for the `random` module inside textarena: the module-level functions (`seed`,
    `randint`, `choice`, ...) go to the current thread's game generator; the rest to `random`."""

    GENERATOR_FUNCTIONS = frozenset(
        name for name in dir(random) if getattr(getattr(random, name), "__self__", None) is random._inst
    )

    def __init__(self) -> None:
        self.local = threading.local()

    def __getattr__(self, name: str) -> Any:
        generator = getattr(self.local, "generator", None)
        if generator is not None and name in self.GENERATOR_FUNCTIONS:
            return getattr(generator, name)
        return getattr(random, name)


GAME_RANDOM = _GameRandom()


def _route_random_to_games() -> None:
    """Point the name `random` at `GAME_RANDOM` in every textarena module imported so far."""
    for name, module in list(sys.modules.items()):
        if name.startswith("textarena") and getattr(module, "random", None) is random:
            setattr(module, "random", GAME_RANDOM)  # noqa: B010  (a module attribute mypy does not know)


def _textarena():
    return require("textarena", extra="textarena", needed_by="gymenvs/TextArena-v0")


class TextArenaEnv(TextEnv):
    """TextArena-v0. The observation is the game's messages to the agent since its last move
    (the first one holds the game's instructions and board). `move(action)` sends text in the game's
    own format, e.g. `[A C]`; a few games also have typed tools (`make_textarena_env` picks them).
    Free text goes to the game as it is. The reward is the game's own for the agent's seat when the
    game ends (1 win, -1 loss, 0 draw in two-player games; single-player games may give partial
    credit). An invalid move is an observation with `info["error"]` = the game's reason; under
    TextArena's rules the game is lost once a seat exceeds its `error_allowance` of invalid moves.

    Args:
        game: a TextArena env id, e.g. "TowerOfHanoi-v0", "Minesweeper-v0", "TicTacToe-v0".
        game_kwargs: keyword arguments for the game (e.g. {"num_disks": 4}).
        opponent: who plays the other seats: "random" (a move the game lists in brackets), a list
            of moves played in order, or any callable(observation text) -> move text.
        num_players: seats in the game (default: 2 for games that require two players, else 1).
        agent_player: the agent's seat (0 moves first).
        error_allowance: invalid moves a seat may make before it loses (default: the game's own, 1).
        max_turns: agent turns allowed (malformed tool calls count too).
        render_mode: None or "ansi".
    """

    default_max_turns = 100

    @validate_config
    def __init__(
        self,
        *,
        game: str = "TowerOfHanoi-v0",
        game_kwargs: dict[str, Any] | None = None,
        opponent: str | Sequence[str] | Callable[[str], str] = "random",
        num_players: PositiveInt | None = None,
        agent_player: NonNegativeInt = 0,
        error_allowance: NonNegativeInt | None = None,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        ta = _textarena()
        known = ta.envs.registration.ENV_REGISTRY
        if game not in known:
            raise ValueError(f"game={game!r} is not a TextArena env id; e.g. {', '.join(sorted(known)[:8])}, ...")
        build_opponent(opponent, self.np_random)  # a bad opponent is a ValueError now, not at reset
        self.game = game
        self.opponent = opponent
        self.error_allowance = error_allowance
        self._game = ta.make(game, **(game_kwargs or {}))
        while isinstance(self._game, ta.Wrapper):  # TextArena's own observation and action wrappers:
            self._game = self._game.env  # the env formats the messages itself
        _route_random_to_games()  # the game's own modules are imported now
        self._random = random.Random(0)
        self.num_players = num_players or self._default_num_players()
        if agent_player >= self.num_players:
            raise ValueError(f"agent_player={agent_player}: {game} has {self.num_players} seat(s), numbered from 0")
        self.agent_player = agent_player
        self._policy: Policy | None = None
        self._invalid_reason: str | None = None
        self._transcript: list[str] = []

    # -- episodes ------------------------------------------------------------------------

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._policy = build_opponent(self.opponent, self.np_random)
        game_seed = int(self.np_random.integers(2**31))
        self._random = random.Random(game_seed)
        with self._game_random():
            self._game.reset(num_players=self.num_players, seed=game_seed)
            self._watch_invalid_moves()
        self._transcript = []
        problem = self._play_opponents()
        return self._agent_view() + (f"\n{problem}" if problem else "")

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("move", {"action": text})

    @tool
    def move(self, action: str) -> Outcome:
        """Make your move, written in the game's own format as its instructions describe (usually in square brackets, e.g. [4] or [A C]).

        Args:
            action: The move; the game reads it as it reads any player's text.
        """  # noqa: E501  (one line: it is the tool's description a model reads)
        self._invalid_reason = None
        with self._game_random():
            self._game.step(action)
        error = self._invalid_reason
        problem = None if self._game_over() else self._play_opponents()
        text = self._agent_view()
        info: dict[str, Any] = {"error": error} if error else {}
        if problem:
            return Outcome.infra(f"{text}\n{problem}", "opponent_failed", problem)
        if not self._game_over():
            return Outcome(text, info=info)
        reward, reason = self._result()
        info.update(reward_reason=reason, game_info=self._game.state.game_info.get(self.agent_player, {}))
        return Outcome(f"{text}\nGame over: {reason} Your reward: {reward:g}.", reward=reward, terminated=True, info=info)

    # -- the game ------------------------------------------------------------------------

    def _play_opponents(self) -> str | None:
        """Let the other seats move until it is the agent's turn; a problem message if they never stop."""
        policy = self._policy
        assert policy is not None, "reset() builds the opponent policy before any move"
        for _ in range(MAX_OPPONENT_MOVES):
            if self._game_over() or self._game.state.current_player_id == self.agent_player:
                return None
            with self._game_random():
                seat, messages = self._game.get_observation()
            move = policy(self._format(messages, seat))
            if not isinstance(move, str):
                return f"The opponent policy returned {type(move).__name__}, not a move string; the episode is cut short."
            with self._game_random():
                self._game.step(move)
        return f"The opponents made {MAX_OPPONENT_MOVES} moves in a row; the episode is cut short."

    def _agent_view(self) -> str:
        """The messages the agent has not seen yet (its own echoed moves left out)."""
        state = self._game.state
        messages, state.observations[self.agent_player] = state.observations[self.agent_player], []
        text = self._format(messages, self.agent_player)
        self._transcript.append(text)
        return text

    def _format(self, messages: list[tuple], seat: int) -> str:
        roles = self._game.state.role_mapping
        lines = []
        for sender, message, *kind in messages:
            if sender == seat or (sender == _GAME_ID and kind and kind[0].name == "PLAYER_ACTION"):
                continue  # the seat's own move, echoed back (single-player games echo it as the game's)
            name = "GAME" if sender == _GAME_ID else roles.get(sender, f"Player {sender}")
            lines.append(f"[{name}] {str(message).strip()}")
        return "\n".join(lines)

    def _game_over(self) -> bool:
        return bool(self._game.state.done)

    def _result(self) -> tuple[float, str]:
        state = self._game.state
        rewards = state.rewards or {}
        reason = str(state.game_info.get(self.agent_player, {}).get("reason") or "the game ended.")
        return float(rewards.get(self.agent_player, 0.0)), reason

    def _watch_invalid_moves(self) -> None:
        """Record the reason of each invalid move the agent makes (TextArena only puts it in a message)."""
        state = self._game.state
        if self.error_allowance is not None:
            state.error_allowance = self.error_allowance
        record = state.set_invalid_move

        def set_invalid_move(*args: Any, **kwargs: Any) -> Any:
            if state.current_player_id == self.agent_player:
                self._invalid_reason = str(kwargs.get("reason", args[0] if args else "invalid move")).strip()
            return record(*args, **kwargs)

        state.set_invalid_move = set_invalid_move

    def _default_num_players(self) -> int:
        """1, unless the game insists on two seats (TextArena's two-player state asserts it)."""
        try:
            with self._game_random():
                self._game.reset(num_players=1, seed=0)
        except AssertionError:
            return 2
        return 1

    @contextmanager
    def _game_random(self) -> Iterator[None]:
        """Inside textarena, `random` is this game's generator while the game runs on this thread."""
        local = GAME_RANDOM.local
        outer = getattr(local, "generator", None)
        local.generator = self._random
        try:
            yield
        finally:
            local.generator = outer

    # -- state ---------------------------------------------------------------------------

    def _episode_state(self) -> dict[str, Any]:
        state = getattr(self._game, "state", None)
        return {
            "game": self.game,
            "agent_player": self.agent_player,
            "current_player": getattr(state, "current_player_id", None),
            "game_over": bool(getattr(state, "done", False)),
            "game_state": json.loads(json.dumps(getattr(state, "game_state", None), default=str)),
        }

    def _render_ansi(self) -> str:
        return "\n".join(self._transcript) or "(no game yet)"


# -- typed tools for some well-known games ---------------------------------------------------


class HanoiTools(TextArenaEnv):
    @tool
    def move_disk(self, source: Literal["A", "B", "C"], target: Literal["A", "B", "C"]) -> Outcome:
        """Move the top disk of one tower onto another.

        Args:
            source: The tower to take the top disk from.
            target: The tower to put it on.
        """
        return self.move(f"[{source} {target}]")


class TicTacToeTools(TextArenaEnv):
    @tool
    def mark(self, cell: int) -> Outcome:
        """Put your mark in a cell of the board.

        Args:
            cell: The cell number, 0 to 8, row by row from the top left.
        """
        return self.move(f"[{cell}]")


class MinesweeperTools(TextArenaEnv):
    @tool
    def reveal(self, row: int, col: int) -> Outcome:
        """Reveal a cell of the board.

        Args:
            row: Row number, from 0 at the top.
            col: Column number, from 0 at the left.
        """
        return self.move(f"[{row} {col}]")


class SudokuTools(TextArenaEnv):
    @tool
    def place(self, row: int, col: int, number: int) -> Outcome:
        """Write a number in an empty cell.

        Args:
            row: Row number, 1 to 9 from the top.
            col: Column number, 1 to 9 from the left.
            number: The number to write, 1 to 9.
        """
        return self.move(f"[{row} {col} {number}]")


class WordGuessTools(TextArenaEnv):
    @tool
    def guess(self, word: str) -> Outcome:
        """Guess the hidden word.

        Args:
            word: Your guess.
        """
        return self.move(f"[{word}]")


class NumberGuessTools(TextArenaEnv):
    @tool
    def guess(self, number: int) -> Outcome:
        """Guess the hidden number.

        Args:
            number: Your guess.
        """
        return self.move(f"[{number}]")


#: Game families (the id before "-v") with typed tools; every game has `move(action)` too.
TYPED_GAMES: dict[str, type[TextArenaEnv]] = {
    "TowerOfHanoi": HanoiTools,
    "TicTacToe": TicTacToeTools,
    "Minesweeper": MinesweeperTools,
    "Sudoku": SudokuTools,
    "Wordle": WordGuessTools,
    "GuessTheNumber": NumberGuessTools,
}


def make_textarena_env(*, game: str = "TowerOfHanoi-v0", **kwargs: Any) -> TextArenaEnv:
    """The entry point of gymenvs/TextArena-v0: the env class with the game's typed tools, if it has any."""
    family = game.split("-v", 1)[0] if isinstance(game, str) else ""
    return TYPED_GAMES.get(family, TextArenaEnv)(game=game, **kwargs)


# What `gymnasium.make_vec` checks keyword arguments against, in the caller, before any slot is built.
_init = inspect.signature(TextArenaEnv.__init__)
make_textarena_env.__signature__ = _init.replace(parameters=list(_init.parameters.values())[1:])  # type: ignore[attr-defined]
