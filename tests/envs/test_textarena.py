"""gymenvs/TextArena-v0: TextArena games played to a win and to a loss, seeding, invalid moves, opponents."""

import random
import re
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)


def make(game, **kwargs):
    return gym.make("gymenvs/TextArena-v0", game=game, **kwargs)


def play(env, moves):
    """Step through `moves` (stopping when the episode ends); the last step's result."""
    for move in moves:
        result = env.step(move)
        if result[2] or result[3]:
            return result
    return result


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


# -- single-player games ---------------------------------------------------------------------

HANOI_SOLUTION = [("A", "C"), ("A", "B"), ("C", "B"), ("A", "C"), ("B", "A"), ("B", "C"), ("A", "C")]


def test_tower_of_hanoi_win_and_loss():
    env = make("TowerOfHanoi-v0")
    tool_names = [schema["function"]["name"] for schema in env.reset(seed=0)[1]["tools"]]
    assert tool_names == ["move", "move_disk"]  # the game's own text format and the typed tool, in name order
    _, reward, terminated, _, info = play(env, [call("move_disk", source=s, target=t) for s, t in HANOI_SOLUTION])
    assert (reward, terminated) == (1.0, True) and "solved" in info["reward_reason"]

    env.reset(seed=0)
    observation, reward, terminated, _, info = env.step("[B C]")  # B is empty: invalid, the game warns
    assert not terminated and "empty tower" in info["error"] and info["error"] in observation
    observation, reward, terminated, _, info = env.step("I move [C A]")  # free text as the game reads it
    assert terminated and reward == 0.0 and "Game over" in observation  # the second invalid move loses


def test_guess_the_number_win_by_binary_search_and_loss():
    env = make("GuessTheNumber-v0")
    low, high = 1, 20
    env.reset(seed=5)
    for _ in range(10):
        guess = (low + high) // 2
        observation, reward, terminated, _, _ = env.step(call("guess", number=guess))
        if terminated:
            break
        if "higher" in observation.rsplit("[Player 0]", 1)[-1]:
            low = guess + 1
        else:
            high = guess - 1
    assert (reward, terminated) == (1.0, True)

    env.reset(seed=5)
    _, reward, terminated, _, _ = play(env, [call("guess", number=99)] * 2)  # out of range, twice
    assert terminated and reward < 1.0


def test_minesweeper_win_and_loss():
    env = make("Minesweeper-v0")
    env.reset(seed=3)
    game = env.unwrapped._game
    observation, *_ = env.step(call("reveal", row=0, col=0))  # the first move places the mines
    safe = [(r, c) for r in range(game.rows) for c in range(game.cols) if game.grid[r][c] != -1 and not game.revealed[r][c]]
    for r, c in safe:
        if not game.revealed[r][c]:
            observation, reward, terminated, _, _ = env.step(f"[{r} {c}]")
    assert (reward, terminated) == (1.0, True)

    env.reset(seed=3)
    env.step(call("reveal", row=0, col=0))
    mines = [(r, c) for r in range(game.rows) for c in range(game.cols) if game.grid[r][c] == -1]
    observation, _, terminated, _, info = env.step(call("reveal", row=mines[0][0], col=mines[0][1]))
    assert not terminated and "hit a mine" in info["error"]
    _, reward, terminated, _, _ = env.step(call("reveal", row=mines[1][0], col=mines[1][1]))
    assert terminated and reward < 1.0


def test_sudoku_win_and_loss():
    env = make("Sudoku-v0")
    observation, _ = env.reset(seed=1)
    game = env.unwrapped._game
    board = [row[:] for row in game.state.game_state["board"]]
    empty = [(r, c) for r in range(9) for c in range(9) if not board[r][c]]
    moves = [call("place", row=r + 1, col=c + 1, number=game.full_grid[r][c]) for r, c in empty]
    _, reward, terminated, _, _ = play(env, moves)
    assert (reward, terminated) == (1.0, True)

    env.reset(seed=1)
    given = next((r, c) for r in range(9) for c in range(9) if game.state.game_state["board"][r][c])
    _, _, terminated, _, info = env.step(call("place", row=given[0] + 1, col=given[1] + 1, number=1))
    assert not terminated and "overwrite" in info["error"]
    _, reward, terminated, _, _ = env.step(call("place", row=given[0] + 1, col=given[1] + 1, number=2))
    assert terminated and reward < 1.0


# -- two-player games --------------------------------------------------------------------------


def test_tic_tac_toe_against_a_scripted_opponent_win_and_loss():
    env = make("TicTacToe-v0", opponent=["[3]", "[4]", "[8]"])
    env.reset(seed=0)
    _, reward, terminated, _, _ = play(env, [call("mark", cell=c) for c in (0, 1, 2)])  # top row before the opponent
    assert (reward, terminated) == (1.0, True)

    env = make("TicTacToe-v0", opponent=["[3]", "[4]", "[5]"])
    env.reset(seed=0)
    observation, reward, terminated, _, info = play(env, [call("mark", cell=c) for c in (0, 1, 8)])
    assert (reward, terminated) == (-1.0, True) and (info["outcome"], info["outcome_reason"]) == ("model", "failed")
    assert "[Player 1] [5]" in observation  # the agent sees the opponent's moves


def test_tic_tac_toe_against_any_callable_and_as_the_second_player():
    seen = []

    def opponent(observation):
        seen.append(observation)
        free = re.findall(r"'\[(\d)\]'", observation.rsplit("Available Moves:", 1)[-1])
        return f"[{free[0]}]"  # the lowest free cell

    env = make("TicTacToe-v0", opponent=opponent, agent_player=1)
    observation, _ = env.reset(seed=0)
    assert "Player 0 placed their symbol (O) in cell 0" in observation  # the opponent moved first
    _, reward, terminated, _, _ = play(env, [call("mark", cell=c) for c in (4, 8, 6)])
    assert terminated and reward == -1.0  # the opponent fills the top row: cells 0, 1, 2
    assert "Available Moves" in seen[0]


def test_an_opponent_that_returns_no_move_ends_the_episode_as_infra():
    env = make("TicTacToe-v0", opponent=lambda observation: None)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(call("mark", cell=0))
    assert (reward, terminated, truncated) == (0.0, False, True) and "not a move string" in observation
    assert (info["outcome"], info["outcome_reason"]) == ("infra", "opponent_failed")


@pytest.mark.parametrize("game", ["ConnectFour-v0", "ConnectFour-v0-train"])  # any variant of a game
def test_connect_four_against_the_random_opponent_plays_to_the_end(game):
    env = make(game, opponent="random")
    for seed in range(3):
        env.reset(seed=seed)
        for step in range(42):
            _, reward, terminated, truncated, info = env.step(f"[{step % 7}]")
            if terminated or truncated:
                break
        assert terminated and reward in (-1.0, 0.0, 1.0)


# -- the gymenvs contract ------------------------------------------------------------------------


def transcript(env, seed, moves):
    steps = [env.reset(seed=seed)[0]]
    for move in moves:
        observation, reward, terminated, truncated, info = env.step(move)
        steps.append((observation, reward, terminated, info))
        if terminated or truncated:
            break
    return steps


def test_same_seed_same_game_and_seeds_differ():
    env = make("TicTacToe-v0", agent_player=1)  # the random opponent moves first
    moves = [f"[{cell}]" for cell in range(9)]
    assert transcript(env, 7, moves) == transcript(env, 7, moves)
    assert len({env.reset(seed=seed)[0] for seed in range(6)}) > 1
    minesweeper = make("Minesweeper-v0")
    assert transcript(minesweeper, 2, ["[4 4]", "[0 0]", "[7 7]"]) == transcript(minesweeper, 2, ["[4 4]", "[0 0]", "[7 7]"])


def test_games_in_threads_play_as_they_do_alone():
    """TextArena games use Python's global `random`: each game keeps its own state, so threads do not mix."""
    moves = ["[4 4]", "[0 0]", "[7 7]", "[2 5]"]

    def play_alone(seed):
        return transcript(make("Minesweeper-v0"), seed, moves)

    expected = [play_alone(seed) for seed in range(8)]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(play_alone, range(8))) == expected


def test_games_leave_the_global_random_stream_alone():
    random.seed(123)
    expected = [random.random() for _ in range(3)]
    random.seed(123)
    env = make("Minesweeper-v0")
    env.reset(seed=0)
    env.step("[4 4]")  # places the mines at random
    assert [random.random() for _ in range(3)] == expected


def test_malformed_tool_calls_are_observations_and_cost_no_game_penalty():
    env = make("TowerOfHanoi-v0")
    env.reset(seed=0)
    for action in [call("move_disk", source="Q", target="C"), call("fly"), call("move", action=7)]:
        observation, _, terminated, _, info = env.step(action)
        assert not terminated and info["error"] and "Invalid action" in observation
    _, reward, terminated, _, _ = play(env, [call("move_disk", source=s, target=t) for s, t in HANOI_SOLUTION])
    assert (reward, terminated) == (1.0, True)


def test_error_allowance_overrides_the_games_rule():
    env = make("TowerOfHanoi-v0", error_allowance=5)
    env.reset(seed=0)
    for _ in range(5):
        _, _, terminated, _, info = env.step("[B C]")
        assert not terminated and "empty tower" in info["error"]
    assert env.step("[B C]")[2]  # the sixth ends it


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"game": "NoSuchGame-v0"}, "not a TextArena env id"),
        ({"game": "TicTacToe-v0", "opponent": "smart"}, "allowed are 'random'"),
        ({"game": "TowerOfHanoi-v0", "agent_player": 1}, "has 1 seat"),
        ({"game": "TicTacToe-v0", "opponent": []}, "at least one move"),
    ],
)
def test_bad_config_is_a_value_error_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make("gymenvs/TextArena-v0", **kwargs)
