"""The agent CLIs on a Harbor task: TerminalAgent-v0 runs Claude Code, Codex, OpenCode and Pi from their derived images of a
Terminal fixture task's image, driven by a scripted policy through each CLI's own shell tool (real containers,
no network). Each CLI's system prompt reaches the policy with the task's instruction.md in the prompt, the
oracle (solution/solve.sh) run through the CLI's shell grades 1.0, and a run that does nothing grades 0.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401
from gymenvs.terminal.tasks import load_terminal_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = next(task for task in load_terminal_tasks() if task.name == "gymenvs/edit-config")

#: agent -> (text its own system prompt holds, its shell tool, the argument holding the command, other arguments)
CLIS = {
    "claude-code": ("You are a Claude agent, built on Anthropic's Claude Agent SDK.", "Bash", "command",
                    {"description": "Run a command"}),
    "codex": ("You are a coding agent running in the Codex CLI", "exec_command", "cmd", {}),
    "opencode": ("You are opencode, an interactive CLI tool", "bash", "command", {"description": "Run a command"}),
    "pi": ("You are an expert coding assistant operating inside pi", "bash", "command", {}),
}


def shell(agent: str, command: str) -> dict:
    _, tool, argument, extra = CLIS[agent]
    return {"name": tool, "arguments": {argument: command, **extra}}


@pytest.fixture(scope="module")
def cli_images(terminal_images, runtime):
    """Each CLI's derived image of the task's image (a COPY of the cached npm tree: ~30 s each the first time)."""
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec

    for agent in CLIS:
        install_agent(runtime, agent_spec(agent), [terminal_images[TASK.name]], progress=False)
    return terminal_images[TASK.name]


def make_env(agent: str):
    return gym.make("gymenvs/TerminalAgent-v0", agent=agent, instance_ids=[TASK.name], call_timeout_s=120.0, max_turns=10)


@pytest.mark.parametrize("agent", sorted(CLIS))
def test_the_oracle_through_the_clis_own_shell_grades_one(cli_images, agent):
    env = make_env(agent)
    try:
        observation, info = env.reset()
        assert info["image"] == f"{cli_images}-{env.unwrapped.agent.image_suffix}"
        assert observation.startswith("[system]\n") and CLIS[agent][0] in observation
        assert TASK.instruction.strip().splitlines()[0] in observation
        observation, reward, terminated, truncated, info = env.step(shell(agent, "pwd && echo marker-$((6 * 7))"))
        assert "/app\nmarker-42" in observation and not (terminated or truncated), (observation, info.get("error"))
        observation, reward, terminated, truncated, info = env.step(shell(agent, TASK.solve_script.read_text()))
        assert not (terminated or truncated), (observation, info.get("error"))
        observation, reward, terminated, truncated, info = env.step("Done.")
        assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
        assert reward == 1.0 and info["outcome_reason"] == "solved", info.get("report")
    finally:
        env.close()


@pytest.mark.parametrize("agent", ["codex"])  # each CLI's run that changes nothing: tests/container/agent/test_agent_clis.py
def test_a_run_that_does_nothing_grades_zero(cli_images, agent):
    env = make_env(agent)
    try:
        env.reset()
        observation, reward, terminated, truncated, info = env.step("Nothing to do.")
        assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
        assert reward == 0.0 and info["outcome_reason"] != "solved"
    finally:
        env.close()


def test_a_missing_derived_image_names_the_install_agent_command(terminal_images):
    import dataclasses

    from gymenvs.container.agent.specs import agent_spec
    from gymenvs.container.runtime import SandboxError

    absent = dataclasses.replace(agent_spec("claude-code"), image_suffix="claude-code-never-installed")
    env = gym.make("gymenvs/TerminalAgent-v0", agent=absent, instance_ids=[TASK.name])
    try:
        with pytest.raises(SandboxError, match=rf"install-agent claude-code {terminal_images[TASK.name]}`"):
            env.reset()
    finally:
        env.close()
