"""Each game played to a win and to a loss, through tool calls, JSON strings and free text."""

import json

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401

FORMS = ["tool_call", "json", "text"]


def act(form, name, arguments, text):
    call = {"name": name, "arguments": arguments}
    return {"tool_call": call, "json": json.dumps(call), "text": text}[form]


def play(env, actions):
    """Step through `actions` (a callable of the env, called each turn) until the episode ends."""
    total, info = 0.0, {}
    for _ in range(200):
        observation, reward, terminated, truncated, info = env.step(actions(env))
        assert "error" not in info, info["error"]
        total += reward
        if terminated or truncated:
            return total, terminated, truncated, info
    raise AssertionError("episode did not end")


# -- Wordle --------------------------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS)
def test_wordle_win(form):
    env = gym.make("gymenvs/Wordle-v0")
    env.reset(seed=11)
    secret = env.unwrapped.state()["secret"]
    first = "crane" if secret != "crane" else "slate"
    words = iter([first, secret])
    reward, terminated, _, info = play(env, lambda e: act(form, "guess", {"word": (w := next(words))}, f"My guess: [{w}]"))
    assert (reward, terminated, info["solved"], info["greens"]) == (1.0, True, True, 1.0)


@pytest.mark.parametrize("form", FORMS)
def test_wordle_loss_after_six_wrong_guesses(form):
    env = gym.make("gymenvs/Wordle-v0")
    env.reset(seed=0, options={"secret": "zebra"})
    words = iter(["crane", "slate", "pious", "mound", "crane", "light"])
    reward, terminated, truncated, info = play(env, lambda e: act(form, "guess", {"word": (w := next(words))}, w))
    assert (reward, terminated, truncated, info["solved"]) == (0.0, True, False, False)
    assert env.unwrapped.state()["guesses"][-1] == "light"


def test_wordle_feedback_and_shaped_signals():
    env = gym.make("gymenvs/Wordle-v0", allow_any_guess=True).unwrapped
    env.reset(options={"secret": "crane"})
    observation, _, _, _, info = env.step("[caner]")
    assert observation.splitlines()[:2] == ["C A N E R", "G Y Y Y Y"]
    assert (info["greens"], info["yellows"], info["repeated"]) == (0.2, 0.8, False)
    assert env.step("caner")[4]["repeated"] is True


def test_wordle_marks_repeated_letters_only_as_often_as_the_secret_has_them():
    from gymenvs.envs.wordle import score_guess

    assert score_guess("speed", "abide") == ["absent", "absent", "present", "absent", "present"]
    assert score_guess("eerie", "there") == ["present", "absent", "present", "absent", "correct"]


def test_wordle_invalid_guesses_cost_a_turn_not_a_guess():
    env = gym.make("gymenvs/Wordle-v0").unwrapped
    env.reset(seed=1)
    for bad, message in [("abc", "not a 5-letter word"), ("qqqqq", "not in the word list"), ("two words", "one word")]:
        assert message in env.step(bad)[4]["error"]
    assert env.state()["guesses"] == [] and env.state()["step_count"] == 3


@pytest.mark.parametrize("words", [["abc"], ["crane", "toolong"], []])
def test_wordle_rejects_a_bad_word_list(words):
    with pytest.raises(ValueError, match="word"):
        gym.make("gymenvs/Wordle-v0", words=words)


# -- Sudoku ---------------------------------------------------------------------------------

def empty_cells(env):
    state = env.unwrapped.state()
    return [(r, c, state["solution"][r][c]) for r in range(9) for c in range(9) if not state["board"][r][c]]


@pytest.mark.parametrize("form", FORMS)
def test_sudoku_win(form):
    env = gym.make("gymenvs/Sudoku-v0", difficulty="hard")
    env.reset(seed=5)

    def next_move(e):
        r, c, d = empty_cells(e)[0]
        return act(form, "place", {"row": r + 1, "col": c + 1, "digit": d}, f"{r + 1} {c + 1} {d}")

    reward, terminated, _, _ = play(env, next_move)
    assert (reward, terminated) == (1.0, True)


def test_sudoku_loss_at_the_turn_limit():
    env = gym.make("gymenvs/Sudoku-v0", max_turns=3)
    env.reset(seed=2)
    for _ in range(3):
        r, c, d = empty_cells(env)[0]
        observation, reward, terminated, truncated, info = env.step(f"row {r + 1}, col {c + 1}: {d}")
    assert (reward, terminated, truncated, info["truncated_reason"]) == (0.0, False, True, "turn_limit")


def test_sudoku_puzzles_have_a_unique_solution_and_the_asked_difficulty():
    from gymenvs.envs.sudoku import CLUES, has_other_solution

    for difficulty in CLUES:
        env = gym.make("gymenvs/Sudoku-v0", difficulty=difficulty).unwrapped
        env.reset(seed=7)
        state = env.state()
        givens = sum(map(bool, sum(state["puzzle"], [])))
        assert CLUES[difficulty] <= givens <= CLUES[difficulty] + 4
        assert not has_other_solution(state["puzzle"], state["solution"])
        assert all(state["solution"][r][c] == d for r, row in enumerate(state["puzzle"]) for c, d in enumerate(row) if d)


def test_sudoku_illegal_moves_are_rejected_with_the_reason():
    env = gym.make("gymenvs/Sudoku-v0").unwrapped
    env.reset(seed=3)
    puzzle = env.state()["puzzle"]
    r, c = next((r, c) for r in range(9) for c in range(9) if puzzle[r][c])
    er, ec = next((r, c) for r in range(9) for c in range(9) if not puzzle[r][c])
    row_digit = next(d for d in puzzle[er] if d)
    cases = [
        ((r + 1, c + 1, 1), "is a given"),
        ((er + 1, ec + 1, row_digit), f"{row_digit} is already in row {er + 1}"),
        ((10, 1, 1), "row must be between 1 and 9"),
        ((1, 1, 0), "digit must be between 1 and 9"),
    ]
    for (row, col, digit), message in cases:
        info = env.step({"name": "place", "arguments": {"row": row, "col": col, "digit": digit}})[4]
        assert message in info["error"]
    assert env.state()["board"] == puzzle
    assert "three numbers" in env.step("put a five somewhere")[4]["error"]


# -- Catch ----------------------------------------------------------------------------------

def toward(env, sign):
    state = env.unwrapped.state()
    gap = (state["ball"][1] - state["paddle"]) * sign
    return "right" if gap > 0 else "left" if gap < 0 else ("stay" if sign > 0 else "left" if state["paddle"] else "right")


@pytest.mark.parametrize("form", FORMS)
def test_catch_win(form):
    env = gym.make("gymenvs/Catch-v0")
    env.reset(seed=4)
    reward, terminated, _, info = play(env, lambda e: act(form, "move", {"direction": (d := toward(e, +1))}, f"  {d.upper()} "))
    assert (reward, terminated, info["caught"]) == (1.0, True, True)


@pytest.mark.parametrize("form", FORMS)
def test_catch_loss(form):
    env = gym.make("gymenvs/Catch-v0")
    env.reset(seed=4)
    reward, terminated, _, info = play(env, lambda e: act(form, "move", {"direction": (d := toward(e, -1))}, d))
    assert (reward, terminated, info["caught"]) == (-1.0, True, False)


@pytest.mark.parametrize("bad", ["up", "move left", "l", "LEFT!", ""])
def test_catch_rejects_anything_but_the_three_directions(bad):
    env = gym.make("gymenvs/Catch-v0").unwrapped
    env.reset(seed=0)
    before = env.state()
    assert "left, stay, right" in env.step(bad)[4]["error"]
    after = env.state()
    assert (after["ball"], after["paddle"]) == (before["ball"], before["paddle"])
    assert "'up' or 'down'" not in env.step({"name": "move", "arguments": {"direction": "up"}})[4]["error"]


# -- ReasoningGym ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reasoning_env():
    return gym.make("gymenvs/ReasoningGym-v0", dataset="basic_arithmetic", size=50)


def correct_answer(env):
    return env.unwrapped.dataset[env.unwrapped.state()["index"]]["answer"]


@pytest.mark.parametrize("form", FORMS)
def test_reasoning_gym_win_and_loss(reasoning_env, form):
    for seed, right in [(1, True), (2, False)]:
        reasoning_env.reset(seed=seed)
        answer = correct_answer(reasoning_env) if right else "not a number"
        text = f"Let me think... <answer>{answer}</answer>"
        reward, terminated, _, info = play(
            reasoning_env, lambda e, answer=answer, text=text: act(form, "answer", {"answer": answer}, text)
        )
        assert (reward, terminated) == ((1.0, True) if right else (0.0, True))
        assert info["correct_answer"] == correct_answer(reasoning_env)


def test_reasoning_gym_same_seed_same_question_and_own_stream():
    a = gym.make("gymenvs/ReasoningGym-v0", dataset="basic_arithmetic")
    b = gym.make("gymenvs/ReasoningGym-v0", dataset="basic_arithmetic")
    assert a.reset(seed=9)[0] == b.reset(seed=9)[0]
    assert [a.reset()[0] for _ in range(3)] == [b.reset()[0] for _ in range(3)]
    assert len({a.reset()[0] for _ in range(5)}) > 1


def test_reasoning_gym_composite_draws_from_every_member():
    env = gym.make("gymenvs/ReasoningGym-v0", datasets={"leg_counting": {"weight": 1}, "basic_arithmetic": {"weight": 1}})
    sources = set()
    for seed in range(20):
        env.reset(seed=seed)
        sources.add(env.unwrapped.state()["dataset"])
    assert sources == {"leg_counting", "basic_arithmetic"}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dataset": "no_such_dataset"}, "unknown reasoning_gym dataset 'no_such_dataset'; allowed: "),
        ({"dataset": "leg_counting", "config": {"bogus": 1}}, "bad config for reasoning_gym dataset 'leg_counting'"),
        ({"datasets": {"leg_counting": {"weight": 1, "colour": "red"}}}, "unknown keys ['colour']"),
        ({"size": 0}, "size"),
    ],
)
def test_reasoning_gym_bad_config_is_a_value_error(kwargs, message):
    with pytest.raises(ValueError) as error:
        gym.make("gymenvs/ReasoningGym-v0", **kwargs)
    assert message in str(error.value)


# -- Echo -----------------------------------------------------------------------------------

def test_echo_returns_the_message_with_the_configured_reward():
    env = gym.make("gymenvs/Echo-v0", reward=0.5, length_reward=0.1, max_turns=2)
    env.reset()
    assert env.step("héllo") == ("héllo", pytest.approx(1.0), False, False, {})
    observation, _, _, truncated, info = env.step({"name": "echo", "arguments": {"message": "bye"}})
    assert observation.startswith("bye") and truncated and info["truncated_reason"] == "turn_limit"


@pytest.mark.parametrize("kwargs", [{"step_sleep_s": -1}, {"step_cpu_work": -5}, {"step_cpu_work": 1.5}, {"max_turns": 0}])
def test_echo_bad_knobs_are_value_errors(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        gym.make("gymenvs/Echo-v0", **kwargs)


@pytest.mark.parametrize("name", ["wordle_answers", "wordle_guesses"])
def test_wordle_word_lists_hold_only_five_letter_lowercase_words(name):
    from gymenvs.envs.wordle import load_word_list

    words = load_word_list(name)
    assert len(words) > 1000
    assert all(len(word) == 5 and word.isalpha() and word.islower() for word in words), [
        word for word in words if not (len(word) == 5 and word.islower())
    ][:5]


def test_probe_builds_one_env_and_reports_its_class_turn_limit_and_tools():
    from gymenvs.envs.catch import CatchEnv
    from gymenvs.registry import probe

    probed = probe("gymenvs/Catch-v0", {"max_turns": 5})
    assert probed.env_class is CatchEnv and probed.max_turns == 5
    assert probed.tools == CatchEnv(max_turns=5).tool_schemas()
    unknown = r"env id 'gymenvs/Nope-v0' is not registered \(did you mean .*\); gymenvs envs are \['gymenvs/Echo-v0'"
    with pytest.raises(ValueError, match=unknown):
        probe("gymenvs/Nope-v0")
