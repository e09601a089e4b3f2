"""environment_factory: a gymenvs env as a class TRL's GRPOTrainer can pool, reset and call."""

import datetime
import gc
import inspect
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
from transformers.utils import get_json_schema

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.core import Outcome, TextEnv, tool
from gymenvs.envs.echo import EchoEnv
from wrappers.trl import EpisodeOverError, environment_factory
from wrappers.trl.factory import EPISODE_OVER_NOTE

PROMPT = [{"role": "user", "content": ""}]


def public_functions(cls):
    return sorted(name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_"))


def test_the_class_exposes_reset_get_reward_and_one_method_per_env_tool():
    Wordle = environment_factory("gymenvs/Wordle-v0")
    Catch = environment_factory("gymenvs/Catch-v0", rows=4)
    # TRL turns every public function of the class into a tool: nothing else may be public.
    assert public_functions(Wordle) == ["get_reward", "guess", "reset"]
    assert public_functions(Catch) == ["get_reward", "move", "reset", "stay"]
    schema = get_json_schema(Catch.move)["function"]
    assert schema["description"] == "Move the paddle one column, or keep it where it is."
    assert schema["parameters"]["properties"]["direction"]["enum"] == ["left", "stay", "right"]
    assert schema["parameters"]["required"] == ["direction"]
    assert list(inspect.signature(Wordle.guess).parameters) == ["self", "word"]
    assert (Wordle.max_turns, Catch.max_turns) == (12, 12)  # for GRPOConfig(max_tool_calling_iterations=...)


def test_reset_seeds_the_episode_from_the_seed_column():
    Wordle = environment_factory("gymenvs/Wordle-v0")
    first, second, other = Wordle(), Wordle(), Wordle()
    assert first.reset(prompt=PROMPT, seed=7) == second.reset(prompt=PROMPT, seed=7)
    other.reset(prompt=PROMPT, seed=8)
    reference = gym.make("gymenvs/Wordle-v0")
    reference.reset(seed=7)
    assert (
        first.env.unwrapped.state()["secret"]
        == second.env.unwrapped.state()["secret"]
        == reference.unwrapped.state()["secret"]
    )
    assert other.env.unwrapped.state()["secret"] != first.env.unwrapped.state()["secret"]


def test_without_a_seed_column_identical_rows_share_a_start_state_and_different_rows_do_not():
    Catch = environment_factory("gymenvs/Catch-v0", columns=50)
    rows = [{"prompt": [{"role": "user", "content": f"Episode {i}."}]} for i in range(6)]
    columns = []
    for row in rows:
        group = [Catch(), Catch()]
        for member in group:
            member.reset(**row)
        ball = [member.env.unwrapped.state()["ball"] for member in group]
        assert ball[0] == ball[1]
        columns.append(ball[0][1])
    assert len(set(columns)) > 1


def test_the_first_observation_is_separated_from_a_non_empty_prompt():
    Echo = environment_factory("gymenvs/Echo-v0")
    echo = Echo()
    observation = echo.reset(prompt=[{"role": "user", "content": "Play."}], seed=0)
    assert observation.startswith("\n\n") and "echo" in observation
    assert not echo.reset(prompt=PROMPT, seed=0).startswith("\n")


def test_an_options_column_reaches_the_env():
    Wordle = environment_factory("gymenvs/Wordle-v0")
    wordle = Wordle()
    wordle.reset(prompt=PROMPT, seed=0, options={"secret": "crane"})
    assert wordle.env.unwrapped.state()["secret"] == "crane"


def test_tools_play_the_env_and_get_reward_returns_the_episode_reward():
    Wordle = environment_factory("gymenvs/Wordle-v0")
    wordle = Wordle()
    wordle.reset(prompt=PROMPT, seed=0, options={"secret": "crane"})
    feedback = wordle.guess(word="slate")
    assert isinstance(feedback, str) and "S L A T E" in feedback and "5 guesses left" in feedback
    assert wordle.get_reward() == 0.0
    solved = wordle.guess("crane")
    assert "Solved" in solved and solved.endswith(EPISODE_OVER_NOTE)
    assert wordle.get_reward() == 1.0


def test_an_invalid_call_gets_the_env_error_observation_and_the_episode_goes_on():
    Wordle = environment_factory("gymenvs/Wordle-v0")
    wordle = Wordle()
    wordle.reset(prompt=PROMPT, seed=0, options={"secret": "crane"})
    assert "not a 5-letter word" in wordle.guess(word="abc")
    assert "unexpected argument 'colour'" in wordle.guess(word="crane", colour="red")
    assert "Solved" in wordle.guess(word="crane")


def test_a_call_after_the_episode_ended_raises_a_clear_error():
    Catch = environment_factory("gymenvs/Catch-v0", rows=2)
    catch = Catch()
    catch.reset(prompt=PROMPT, seed=0)
    catch.move(direction="stay")  # rows=2: one move lands the ball
    with pytest.raises(EpisodeOverError, match="episode is over"):
        catch.move(direction="left")
    catch.reset(prompt=PROMPT, seed=1)  # a pooled instance is reused: reset starts afresh
    assert catch.get_reward() == 0.0
    assert "ball" in catch.move(direction="stay")


def test_a_tool_called_before_reset_raises():
    catch = environment_factory("gymenvs/Catch-v0")()
    with pytest.raises(RuntimeError, match="reset"):
        catch.move(direction="left")


def test_each_call_builds_a_distinct_class_so_several_envs_can_go_in_a_dict():
    factories = {"wordle": environment_factory("gymenvs/Wordle-v0"), "catch": environment_factory("gymenvs/Catch-v0")}
    assert factories["wordle"] is not environment_factory("gymenvs/Wordle-v0")
    assert factories["wordle"].__name__ == "Wordle_v0" and factories["catch"].__name__ == "Catch_v0"


# -- bad input: clear errors when the class is built -----------------------------------


def test_an_unregistered_env_id_is_rejected_with_the_known_ids():
    with pytest.raises(ValueError, match=r"'gymenvs/Nope-v0' is not registered.*gymenvs/Wordle-v0"):
        environment_factory("gymenvs/Nope-v0")


def test_invalid_env_kwargs_fail_when_the_class_is_built():
    with pytest.raises(ValueError, match="rows"):
        environment_factory("gymenvs/Catch-v0", rows=1)


class ChoicesEnv(TextEnv):
    """A tool whose docstring transformers' get_json_schema reads differently from the env: it turns a
    trailing `(choices: [...])` into an enum, so TRL would show the model another schema."""

    def _start_episode(self, options):
        return "Pick a day."

    @tool
    def pick(self, day: str) -> Outcome:
        """Pick a day.

        Args:
            day: The day (choices: ["mon", "tue"])
        """
        return Outcome(day, terminated=True)


def test_a_tool_that_trl_would_describe_otherwise_fails_when_the_class_is_built():
    gym.register("gymenvs_tests/Choices-v0", entry_point=ChoicesEnv)
    try:
        with pytest.raises(ValueError, match="tool 'pick' cannot be described to a model: TRL would read"):
            environment_factory("gymenvs_tests/Choices-v0")
    finally:
        del gym.registry["gymenvs_tests/Choices-v0"]


def test_a_tool_type_no_chat_template_can_describe_fails_when_its_env_is_defined():
    with pytest.raises(TypeError, match="cannot be described to a model"):

        class DatedEnv(TextEnv):
            @tool
            def pick(self, day: datetime.date) -> Outcome:
                """Pick a day.

                Args:
                    day: The day.
                """
                return Outcome(str(day), terminated=True)


def test_a_tool_without_docstring_or_type_hint_is_rejected_when_its_env_is_defined():
    with pytest.raises(TypeError, match="needs a docstring"):

        class NoDoc(TextEnv):
            @tool
            def act(self, x: int) -> str:
                return ""

    with pytest.raises(TypeError, match="needs a type hint"):

        class NoHint(TextEnv):
            @tool
            def act(self, x) -> str:
                """Act.

                Args:
                    x: Anything.
                """
                return ""


# -- lifecycle: TRL never closes pooled instances ----------------------------------------


CLOSED: list[str] = []


class ClosingEcho(EchoEnv):
    def close(self):
        CLOSED.append("closed")
        super().close()


def test_an_instance_closes_its_env_when_collected():
    gym.register("gymenvs_tests/ClosingEcho-v0", entry_point=ClosingEcho)
    try:
        instance = environment_factory("gymenvs_tests/ClosingEcho-v0")()
        CLOSED.clear()
        instance.reset(prompt=PROMPT, seed=0)
        del instance
        gc.collect()
        assert CLOSED == ["closed"]
    finally:
        del gym.registry["gymenvs_tests/ClosingEcho-v0"]


@pytest.mark.slow  # waits out a timeout or a subprocess: the quick lane leaves it to the full suite
def test_instances_still_alive_at_exit_close_their_envs():
    script = textwrap.dedent(
        """
        import gymnasium as gym
        from gymenvs.envs.echo import EchoEnv
        from wrappers.trl import environment_factory

        class LoudEcho(EchoEnv):
            def close(self):
                print("closed", flush=True)

        gym.register("exit_test/LoudEcho-v0", entry_point=LoudEcho)
        Echo = environment_factory("exit_test/LoudEcho-v0")
        pool = [Echo(), Echo()]  # as TRL keeps them: alive until the interpreter exits
        for env in pool:
            env.reset(prompt=[{"role": "user", "content": ""}], seed=0)
        print("exiting", flush=True)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=".")
    assert result.returncode == 0, result.stderr
    # One close per pooled instance (the probe env built at construction is closed at once).
    assert result.stdout.split() == ["closed", "exiting", "closed", "closed"]


def test_importing_the_bridge_loads_no_heavy_library():
    script = (
        "import sys, wrappers.trl, wrappers.trl.factory, wrappers.trl.rollout; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'trl', 'datasets', 'vllm'}))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=".")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_bad_seed_column_is_rejected_with_its_value():
    wordle = environment_factory("gymenvs/Wordle-v0")()
    with pytest.raises(ValueError, match="seed column: expected a non-negative integer, got -1"):
        wordle.reset(prompt=PROMPT, seed=-1)


def test_instances_expose_reward_and_done_as_trl_examples_read_them():
    Catch = environment_factory("gymenvs/Catch-v0", rows=2)
    catch = Catch()
    catch.reset(prompt=PROMPT, seed=0)
    assert (catch.reward, catch.done) == (0.0, False)
    catch.stay()  # rows=2: one move lands the ball; stay() as TRL's Catch prompt names it
    assert catch.done and catch.reward in (1.0, -1.0) and catch.reward == catch.get_reward()
    assert "reward" not in public_functions(Catch) and "done" not in public_functions(Catch)  # not tools


def test_env_reward_false_leaves_the_reward_to_the_users_functions():
    Wordle = environment_factory("gymenvs/Wordle-v0", env_reward=False)
    assert public_functions(Wordle) == ["guess", "reset"]  # TRL adds no reward column of its own
    wordle = Wordle()
    wordle.reset(prompt=PROMPT, seed=0, options={"secret": "crane"})
    wordle.guess("crane")
    assert wordle.reward == 1.0 and wordle.done


def test_two_configurations_of_one_env_get_two_names_and_name_sets_one():
    assert environment_factory("gymenvs/Catch-v0").__name__ == "Catch_v0"
    names = {
        environment_factory("gymenvs/Catch-v0", rows=2).__name__,
        environment_factory("gymenvs/Catch-v0", columns=9).__name__,
    }
    assert names == {"Catch_v0_rows_2", "Catch_v0_columns_9"}
    assert environment_factory("gymenvs/Catch-v0", name="small_catch", rows=2).__name__ == "small_catch"
    with pytest.raises(ValueError, match="name='small catch'"):
        environment_factory("gymenvs/Catch-v0", name="small catch")


def test_env_kwargs_are_taken_as_keywords_or_a_mapping_and_make_rollout_func_takes_the_mapping_only():
    from wrappers.trl import make_rollout_func

    as_keywords = environment_factory("gymenvs/Catch-v0", rows=2)
    as_mapping = environment_factory("gymenvs/Catch-v0", env_kwargs={"rows": 2})
    assert as_keywords.env_kwargs == as_mapping.env_kwargs == {"rows": 2}
    rollout = make_rollout_func("gymenvs/Catch-v0", env_kwargs={"rows": 2}, max_tokens_per_turn=4)
    assert rollout.env_kwargs == {"rows": 2} and rollout.max_tokens_per_turn == 4
    rollout.close()
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'rows'.*env_kwargs=\{\.\.\.\}"):
        make_rollout_func("gymenvs/Catch-v0", rows=2, max_tokens_per_turn=4)
    with pytest.raises(ValueError, match="group_size=0"):
        environment_factory("gymenvs/Catch-v0", group_size=0)
