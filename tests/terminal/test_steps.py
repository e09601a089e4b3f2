"""Multi-step Harbor tasks ([[steps]]: `gymenvs.terminal.steps`): each step's instruction in turn, each graded by its
own tests, the next step going on from the files the agent left, and the task's reward by Harbor's rule."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.container.runtime.owners import LABEL_PID
from gymenvs.core.outcomes import EndedBy
from gymenvs.terminal.grading import VerifierResult
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.tasks import fixtures_path

FIXTURE = fixtures_path() / "grow-a-script"
TASK = "gymenvs/grow-a-script"
SUBMIT = {"name": "submit", "arguments": {}}
#: Step "extend" done in part: a name, and the world without one, but no --all (2 of its 3 checks).
PARTIAL = "printf '#!/bin/bash\\necho \"hello, ${1:-world}\"\\n' > /app/greet.sh"


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def solve(step: str) -> dict:
    return bash((FIXTURE / "steps" / step / "solution" / "solve.sh").read_text())


def copy_fixture(tmp_path: Path, toml_edit=lambda text: text) -> Path:
    folder = tmp_path / "grow-a-script"
    shutil.copytree(FIXTURE, folder)
    (folder / "task.toml").write_text(toml_edit((folder / "task.toml").read_text()))
    return folder


# -- the task model -----------------------------------------------------------------------------------------


def test_a_steps_view_has_its_instruction_tests_solution_and_settings():
    task = TerminalTask.from_dir(FIXTURE)
    assert [step.name for step in task.steps] == ["write", "extend"] and task.instruction == ""
    extend = task.at_step(1)
    assert extend.instruction.startswith("Extend `/app/greet.sh`")
    assert extend.test_script == FIXTURE / "steps/extend/tests/test.sh"
    assert extend.solve_script == FIXTURE / "steps/extend/solution/solve.sh"
    assert extend.config.agent.timeout_sec == 600.0  # [agent]'s: the step sets none
    assert extend.config.verifier.timeout_sec == 60.0  # the step's own
    assert task.config.unknown_keys == []


def test_a_steps_agent_time_is_its_own_and_its_verifier_does_not_inherit_the_tasks(tmp_path):
    """As Harbor 0.22.0's code does (its docs say the verifier's timeout falls back to [verifier]'s; it does not)."""
    extend = '[[steps]]\nname = "extend"\nhealthcheck = "x"\n\n[steps.agent]\ntimeout_sec = 30\n'
    folder = copy_fixture(tmp_path, lambda text: text.replace(
        '[[steps]]\nname = "extend"\n\n[steps.verifier]\ntimeout_sec = 60.0\n', extend) + "\n[verifier]\ntimeout_sec = 99\n")
    task = TerminalTask.from_dir(folder)
    assert task.at_step(1).config.agent.timeout_sec == 30.0
    assert task.at_step(1).config.verifier.timeout_sec == 600.0
    assert task.config.unknown_keys == ["steps.extend.healthcheck"]


@pytest.mark.parametrize(("breakage", "error"), [
    (lambda folder: (folder / "steps/extend/instruction.md").unlink(), "step 'extend' has no steps/extend/instruction.md"),
    (lambda folder: (folder / "steps/extend/tests/test.sh").unlink(), "step 'extend' has no test script"),
    (lambda folder: (folder / "task.toml").write_text('[[steps]]\nname = "write"\n[[steps]]\nname = "write"\n'),
     "repeat a name"),
    (lambda folder: (folder / "task.toml").write_text('[[steps]]\nname = "../up"\n'), "steps.0.name"),
    (lambda folder: (folder / "task.toml").write_text('multi_step_reward_strategy = "max"\n[[steps]]\nname = "write"\n'),
     "multi_step_reward_strategy"),
], ids=["no_instruction", "no_test_script", "same_name", "bad_name", "bad_strategy"])
def test_a_malformed_step_is_a_value_error_naming_it(tmp_path, breakage, error):
    folder = copy_fixture(tmp_path)
    breakage(folder)
    with pytest.raises(ValueError, match=error):
        TerminalTask.from_dir(folder)


def test_a_step_without_tests_of_its_own_runs_the_tasks(tmp_path):
    folder = copy_fixture(tmp_path)
    shutil.copytree(folder / "steps/write/tests", folder / "tests")
    (folder / "steps/write/tests/test.sh").unlink()
    task = TerminalTask.from_dir(folder)
    assert task.at_step(0).test_script == folder / "tests/test.sh"
    assert task.at_step(1).test_script == folder / "steps/extend/tests/test.sh"
    assert task.at_step(1).test_folders == (folder / "tests", folder / "steps/extend/tests")  # the step's over the task's


# -- Harbor's rules for going on and combining ------------------------------------------------------------


def result(reward: float | None, **scores: float) -> VerifierResult:
    if reward is None:
        return VerifierResult(None, outcome=EndedBy.INFRA, reason="grading_timeout")
    return VerifierResult(reward, dict(scores), reason="solved" if reward >= 1 else "failed")


@pytest.mark.parametrize(("strategy", "results", "expected"), [
    (None, [result(1.0), result(0.5)], 0.75),  # mean, the default
    ("mean", [result(1.0), result(None), result(0.0)], 0.5),  # a step without a verdict is left out, not a 0
    ("final", [result(1.0), result(0.5)], 0.5),
])
def test_step_rewards_combine_by_the_tasks_strategy(tmp_path, strategy, results, expected):
    from gymenvs.terminal.steps import combine

    line = f'multi_step_reward_strategy = "{strategy}"' if strategy else ""
    folder = copy_fixture(tmp_path, lambda text: text.replace('multi_step_reward_strategy = "mean"', line))
    assert combine(TerminalTask.from_dir(folder), results).reward == expected


def test_scores_are_averaged_each_over_the_graded_steps_a_missing_one_counting_zero():
    from gymenvs.terminal.steps import combine

    combined = combine(TerminalTask.from_dir(FIXTURE), [result(1.0, style=1.0, speed=0.5), result(0.0, speed=1.0)])
    assert combined.scores == {"speed": 0.75, "style": 0.5} and combined.reward == 0.5


@pytest.mark.parametrize(("min_reward", "graded", "goes_on"), [
    (None, result(0.0), True),
    ("1.0", result(0.99), False),
    ("1.0", result(1.0), True),
    ("{ speed = 0.5 }", result(1.0, speed=0.4), False),
    ("{ speed = 0.5 }", result(0.0, speed=0.5), True),
    ("{ style = 0.5 }", result(1.0, speed=1.0), False),  # a score the step did not write is below any minimum
    (None, result(None), False),  # no verdict: the steps after it do not run
])
def test_the_steps_after_one_run_only_if_it_gave_a_verdict_at_its_min_reward(tmp_path, min_reward, graded, goes_on):
    from gymenvs.terminal.steps import goes_on as goes_on_after

    line = f"min_reward = {min_reward}" if min_reward else ""
    folder = copy_fixture(tmp_path, lambda text: text.replace("min_reward = 1.0", line))
    assert goes_on_after(TerminalTask.from_dir(folder).at_step(0), graded) is goes_on


# -- episodes, on the engine --------------------------------------------------------------------------------


@pytest.fixture
def make_env(terminal_images):
    envs = []

    def make(env_id="gymenvs/Terminal-v0", **kwargs):
        kwargs.setdefault("instance_ids", [TASK])
        env = gym.make(env_id, command_timeout_s=30.0, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def step_images(docker_client) -> list:
    """The step snapshots this process made (the validator's, in another test process, have the same name)."""
    return docker_client.images.list(name="gymenvs-step", filters={"label": f"{LABEL_PID}={os.getpid()}"})


def test_each_step_is_given_in_turn_graded_by_its_tests_and_goes_on_from_the_files_left(make_env, docker_client):
    env = make_env()
    observation, _ = env.reset(seed=0)
    assert observation.startswith("Write an executable bash script `/app/greet.sh`")
    first = env.unwrapped.episode_sandbox.id
    env.step(solve("write"))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, False)  # the task's reward comes at its end
    assert observation.startswith("Step 1 of the task is done. Its next step:\n\nExtend `/app/greet.sh`")
    assert info["steps"] == [{"step": 0, "reward": 1.0, "outcome": "model", "reason": "solved"}] and info["step"] == 1
    assert env.unwrapped.episode_sandbox.id != first  # a new container, from the files the first step left
    observation, *_ = env.step(bash("./greet.sh; cat names.txt"))
    assert "hello, world\nAda\nLin\nGrace\n" in observation  # step 1's script; step 2's workdir/, then its setup.sh
    env.step(solve("extend"))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False), info["report"]
    assert [(s["step"], s["reward"]) for s in info["steps"]] == [(0, 1.0), (1, 1.0)]
    assert info["report"]["detail"] == "mean of 2 step rewards (1, 1)" and info["outcome_reason"] == "solved"
    assert not step_images(docker_client)  # the images the steps went on from are gone with the episode


@pytest.mark.parametrize(("strategy", "expected"), [("mean", (1 + 2 / 3) / 2), ("final", 2 / 3)])
def test_the_episodes_reward_is_the_strategys(make_env, tmp_path, strategy, expected):
    folder = copy_fixture(tmp_path, lambda text: text.replace('"mean"', f'"{strategy}"'))
    env = make_env(dataset=str(folder))
    env.reset(seed=0)
    env.step(solve("write"))
    env.step(SUBMIT)
    env.step(bash(PARTIAL))
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert terminated and reward == pytest.approx(expected)
    assert "checks passed: 2 of 3" in info["report"]["log_tail"]  # the last step's test output, either way


def test_a_step_below_its_min_reward_ends_the_episode(make_env, docker_client):
    env = make_env()
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step(SUBMIT)  # nothing written: step "write" scores 0 < 1
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["steps"] == [{"step": 0, "reward": 0.0, "outcome": "model", "reason": "failed"}]
    assert not step_images(docker_client)


def test_the_reference_agent_runs_again_for_each_step(make_env):
    env = make_env("gymenvs/TerminalAgent-v0", agent="reference", call_timeout_s=60.0)
    observation, _ = env.reset(seed=0)
    assert "[user]\nWrite an executable bash script" in observation
    env.step(solve("write"))
    observation, reward, terminated, _, info = env.step(SUBMIT)
    assert (reward, terminated) == (0.0, False) and "[user]\nExtend `/app/greet.sh`" in observation
    assert observation.startswith("[system]\n")  # a new session, as Harbor starts the agent afresh for each step
    env.step(solve("extend"))
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert (reward, terminated) == (1.0, True) and len(info["steps"]) == 2
    assert sum(1 for call in info["trajectory"] if not call["side"]) == 4  # both steps' two replies each


def test_validation_runs_the_oracle_step_by_step(runtime):
    from gymenvs.terminal.validate import run_episode

    task = TerminalTask.from_dir(FIXTURE)
    assert run_episode(runtime, task, oracle=True).reward == 1.0
    empty = run_episode(runtime, task, oracle=False)
    assert empty.reward == 0.0 and empty.detail == "mean of 1 step rewards (0)"  # step "write" failed: no "extend"
