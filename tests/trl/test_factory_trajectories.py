"""environment_factory(..., trajectories=DIR): each instance's episodes as ATIF trajectories, as the env saw them (the
reset's observation, the tool calls with their results and rewards, how the episode ended), through TRL's own tool
loop too."""

import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.core.outcomes import InfraError
from gymenvs.envs.echo import EchoEnv
from gymenvs.trajectories import read_trajectories
from wrappers.trl import environment_factory

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
PROMPT = [{"role": "user", "content": ""}]


def test_an_episode_the_env_ends_is_written_at_once_with_its_calls_rewards_and_errors(tmp_path):
    Wordle = environment_factory("gymenvs/Wordle-v0", trajectories=tmp_path)
    wordle = Wordle()
    first = wordle.reset(prompt=PROMPT, seed=3, options={"secret": "crane"})
    replies = [wordle.guess(word="slate"), wordle.guess(word="abc"), wordle.guess(word="crane")]
    wordle._recording.flush()  # handed to the writing thread by the call that solved it
    [trajectory] = read_trajectories(tmp_path / "rank-0")
    user, *agent = trajectory.steps
    assert user.source == "user" and user.message == first
    assert [(step.tool_calls[0].function_name, step.tool_calls[0].arguments) for step in agent] == [
        ("guess", {"word": "slate"}), ("guess", {"word": "abc"}), ("guess", {"word": "crane"})]
    assert replies[:2] == [step.observation.results[0].content for step in agent[:2]]
    assert replies[2].startswith(agent[2].observation.results[0].content)  # the factory adds its "episode is over" note
    assert [step.extra["reward"] for step in agent] == [0.0, 0.0, 1.0]
    assert "not a 5-letter word" in agent[1].extra["error"] and all(step.metrics is None for step in agent)
    extra = trajectory.extra["gymenvs"]
    assert (extra["env_id"], extra["seed"], extra["environment"], extra["retries"]) == ("gymenvs/Wordle-v0", 3, "Wordle_v0", 0)
    assert (extra["reward"], extra["turns"], extra["invalid_actions"], extra["end"]) == (1.0, 3, 1, "terminated")
    assert extra["outcome"] == "model" and trajectory.agent.name == "gymenvs-environment-factory"
    assert [tool["function"]["name"] for tool in trajectory.agent.tool_definitions] == ["guess"]


def test_an_episode_trl_stops_playing_is_written_cut_short_at_the_next_reset_and_at_close(tmp_path):
    Catch = environment_factory("gymenvs/Catch-v0", rows=6, trajectories=str(tmp_path))
    catch = Catch()
    catch.reset(prompt=PROMPT, seed=0)
    catch.move(direction="left")  # the model answers without a tool call: TRL moves on to the next batch
    catch._recording.flush()
    assert not (tmp_path / "rank-0").exists()
    catch.reset(prompt=PROMPT, seed=1)
    catch._recording.flush()
    assert [t.extra["gymenvs"]["seed"] for t in read_trajectories(tmp_path / "rank-0")] == [0]
    catch.stay()
    catch._close()  # as when the instance is collected or the interpreter exits
    trajectories = read_trajectories(tmp_path / "rank-0")
    assert [t.extra["gymenvs"]["seed"] for t in trajectories] == [0, 1]
    for trajectory in trajectories:
        extra = trajectory.extra["gymenvs"]
        assert (extra["turns"], extra["end"], extra["end_reason"], extra["reward"]) == (1, "truncated", "cut_short", 0.0)


@pytest.mark.slow  # a Python process that exits with instances alive: about 2 s
def test_episodes_of_instances_alive_at_exit_are_written(tmp_path):
    script = textwrap.dedent(
        f"""
        from wrappers.trl import environment_factory

        Catch = environment_factory("gymenvs/Catch-v0", rows=6, trajectories={str(tmp_path)!r})
        pool = [Catch(), Catch()]  # as TRL keeps them: alive until the interpreter exits
        for seed, env in enumerate(pool):
            env.reset(prompt=[{{"role": "user", "content": ""}}], seed=seed)
            env.stay()
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=".")
    assert result.returncode == 0, result.stderr
    trajectories = read_trajectories(tmp_path / "rank-0")
    assert sorted(t.extra["gymenvs"]["seed"] for t in trajectories) == [0, 1]
    assert {t.extra["gymenvs"]["end_reason"] for t in trajectories} == {"cut_short"}


class BrokenEcho(EchoEnv):
    def reset(self, *, seed=None, options=None):
        raise InfraError("no sandbox")


def test_an_episode_whose_reset_failed_every_try_is_written_as_failed(tmp_path):
    gym.register("gymenvs_tests/BrokenEcho-v0", entry_point=BrokenEcho, disable_env_checker=True)
    try:
        broken = environment_factory("gymenvs_tests/BrokenEcho-v0", infra_retries=1, trajectories=tmp_path)()
        observation = broken.reset(prompt=PROMPT, seed=0)
        broken._recording.flush()
    finally:
        del gym.registry["gymenvs_tests/BrokenEcho-v0"]
    [trajectory] = read_trajectories(tmp_path / "rank-0")
    assert trajectory.steps[0].message == observation and "no sandbox" in observation
    extra = trajectory.extra["gymenvs"]
    assert (extra["end"], extra["outcome"], extra["retries"], extra["turns"]) == ("failed", "infra", 1, 0)
    assert "no sandbox" in extra["error"] and broken.get_reward() is None


class CrashingEcho(EchoEnv):
    def step(self, action):
        raise RuntimeError("the env crashed")


def test_a_call_whose_env_step_raised_is_recorded_with_the_error_trl_shows_the_model(tmp_path):
    gym.register("gymenvs_tests/CrashingEcho-v0", entry_point=CrashingEcho, disable_env_checker=True)
    try:
        echo = environment_factory("gymenvs_tests/CrashingEcho-v0", trajectories=tmp_path)()
        echo.reset(prompt=PROMPT, seed=0)
        with pytest.raises(RuntimeError, match="the env crashed"):
            echo.echo(message="hi")
        echo._close()
    finally:
        del gym.registry["gymenvs_tests/CrashingEcho-v0"]
    [trajectory] = read_trajectories(tmp_path / "rank-0")
    step = trajectory.steps[-1]
    assert (step.tool_calls[0].function_name, step.tool_calls[0].arguments) == ("echo", {"message": "hi"})
    assert step.observation.results[0].content == "{'error': 'the env crashed'}"  # what TRL makes of the exception
    assert "the env crashed" in step.extra["error"] and trajectory.extra["gymenvs"]["end_reason"] == "cut_short"


def test_a_write_that_fails_in_a_tool_call_is_raised_by_the_next_reset_not_shown_to_the_model(tmp_path):
    Catch = environment_factory("gymenvs/Catch-v0", rows=2, trajectories=tmp_path / "runs")
    catch = Catch()
    catch.reset(prompt=PROMPT, seed=0)
    (tmp_path / "runs").write_text("a file where the folder should be")
    assert "ball" in catch.stay()  # the episode ends here; its write fails, the tool's result does not say so
    with pytest.raises(OSError):
        catch.reset(prompt=PROMPT, seed=1)


def test_a_bad_trajectories_value_is_rejected_when_the_class_is_built(tmp_path):
    with pytest.raises(ValueError, match="trajectories=3: expected a folder"):
        environment_factory("gymenvs/Echo-v0", trajectories=3)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="trajectories=.*it names a file"):
        environment_factory("gymenvs/Echo-v0", trajectories=tmp_path / "file")
    assert environment_factory("gymenvs/Echo-v0").trajectories is None


def test_trls_tool_loop_plays_episodes_that_are_written_with_the_calls_it_made(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from gymenvs.dialects import response_parser
    from tests.trl.families_support import GUESSES
    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset
    from wrappers.trl.extras.tiny_families import (
        family_model,
        family_tokenizer,
        model_turn_text,
        script_generation,
        tool_call_turns,
    )
    from wrappers.trl.rollout.transcript import training_template

    tokenizer = family_tokenizer("qwen3")
    model, template = family_model(tokenizer), training_template(tokenizer)
    turns = tool_call_turns(tokenizer, "guess", "word", list(GUESSES), template)  # three calls, then a reply
    reply = model_turn_text(tokenizer, {"role": "assistant", "content": "Done."}, "Done.", [{"role": "user", "content": "."}],
                            template)
    script_generation(model, [*turns, tokenizer.encode(reply, add_special_tokens=False)])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), **CPU_TRAINING_ARGS, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=2000, max_steps=1, max_tool_calling_iterations=len(GUESSES),
                      logging_steps=1, seed=0)
    Wordle = environment_factory("gymenvs/Wordle-v0", max_turns=len(GUESSES), trajectories=tmp_path / "runs")
    trainer = GRPOTrainer(model=model, processing_class=response_parser(tokenizer), args=args,
                          train_dataset=episode_dataset(2), environment_factory=Wordle)
    trainer.train()
    trajectories = read_trajectories(tmp_path / "runs" / "rank-0")  # the turn limit ended each episode: written then
    assert len(trajectories) == 2
    for trajectory in trajectories:
        calls = [step.tool_calls[0] for step in trajectory.steps if step.source == "agent"]
        assert [(call.function_name, call.arguments["word"]) for call in calls] == [("guess", word) for word in GUESSES]
        extra = trajectory.extra["gymenvs"]
        assert (extra["end"], extra["outcome_reason"]) == ("truncated", "turn_limit")
        assert extra["environment"] == "Wordle_v0_max_turns_3"
    assert sorted(t.extra["gymenvs"]["reward"] for t in trajectories) == sorted(e.reward for e in trainer.environments)
