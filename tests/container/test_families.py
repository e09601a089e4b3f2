"""A task family written outside gymenvs (examples/task_families/files.py) runs on the container platform with
both ways of acting, as SWE-bench rows and Harbor folders do: through tools, and through an agent program."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401
from gymenvs.container.agent.env import AgentEnv
from gymenvs.container.tools_env import ToolsEnv
from gymenvs.core.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "task_families"))
from files import BUILTIN, FileTasks  # noqa: E402

TASK = BUILTIN[1]  # /etc/app/mode: a directory the image does not have


def write(content: str) -> dict:
    return {"name": "bash", "arguments": {"command": f"mkdir -p /etc/app && printf %s {content!r} > {TASK.path}"}}


@pytest.mark.docker
@pytest.mark.parametrize("content, reward", [(TASK.content, 1.0), ("staging", 0.0)])
def test_the_tools_env_runs_a_family_of_ones_own(swe_images, content, reward):
    env = ToolsEnv(family=FileTasks(instance_ids=[TASK.instance_id]))
    try:
        observation, info = env.reset(seed=0)
        assert TASK.path in observation and "You work in a Linux container, in /root" in observation
        env.step(write(content))
        _, got, terminated, truncated, info = env.step({"name": "submit"})
        assert (got, terminated, truncated) == (reward, True, False)
        assert info["outcome"] == "model" and info["outcome_reason"] == ("solved" if reward else "failed")
        assert env.state()["family"] == "files"
    finally:
        env.close()


@pytest.mark.docker
def test_the_agent_env_runs_it_with_an_agent_program_in_the_container(swe_images):
    env = AgentEnv(family="files:FileTasks", instance_ids=[TASK.instance_id], agent="reference")
    try:
        observation, info = env.reset(seed=0)
        assert TASK.path in observation  # the family's instruction, read by the agent from its task file
        assert "working in a Linux container" in info["request"]["messages"][0]["content"]  # no repository assumed
        _, _, terminated, truncated, _ = env.step(write(TASK.content))
        assert not (terminated or truncated)
        _, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert (reward, terminated, truncated) == (1.0, True, False) and info["outcome_reason"] == "solved"
    finally:
        env.close()


class DoneEarly(FileTasks):
    """FileTasks that says it is done with the episode's container once it has read the file, then, as a family
    whose tests still run would, waits: until the engine no longer has the container (or 30 s)."""

    def grade(self, run):
        grade = super().grade(run)
        run.done_with_sandbox()
        deadline = time.monotonic() + 30

        def listed() -> list:  # sparse: not inspected, which fails if it goes meanwhile
            return self.engine.containers.list(all=True, sparse=True, filters={"name": run.sandbox.name})

        while time.monotonic() < deadline and listed():
            time.sleep(0.05)
        self.removed_while_grading = not listed()
        return grade


@pytest.mark.docker
@pytest.mark.parametrize("env_class", [ToolsEnv, AgentEnv])
def test_a_family_done_with_the_container_has_it_removed_while_it_still_grades(swe_images, docker_client, env_class):
    family = DoneEarly(instance_ids=[TASK.instance_id])
    family.engine = docker_client
    env = env_class(family=family, **({"agent": "reference"} if env_class is AgentEnv else {}))
    try:
        env.reset(seed=0)
        env.step(write(TASK.content))
        _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
        assert (reward, terminated) == (1.0, True) and family.removed_while_grading
    finally:
        env.close()


def test_a_registered_id_names_the_family_and_keywords_go_to_it_or_to_the_env():
    gym.register("files/Files-v0", entry_point="gymenvs.container.tools_env:ToolsEnv", kwargs={"family": "files:FileTasks"})
    try:
        env = gym.make("files/Files-v0", instance_ids=["answer"], warm_pool=0, command_timeout_s=5.0)
        assert env.unwrapped.family.options.instance_ids == ("answer",) and env.unwrapped.config.command_timeout_s == 5.0
        assert [task.instance_id for task in env.unwrapped.tasks] == ["answer"]  # no engine was reached
        env.close()
        with pytest.raises(ConfigError, match=r"unknown argument colour='red'.*Accepted: .*command_timeout_s.*image"):
            gym.make("files/Files-v0", colour="red")
        with pytest.raises(ConfigError, match="image=3"):
            gym.make("files/Files-v0", image=3)
        with pytest.raises(ConfigError, match="beside family="):
            ToolsEnv(family=FileTasks(), image="other")
    finally:
        del gym.registry["files/Files-v0"]
