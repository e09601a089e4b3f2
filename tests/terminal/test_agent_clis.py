"""The agent CLIs on a Harbor task: TerminalAgent-v0 runs Claude Code, Codex, OpenCode and Pi from their derived images of a
Terminal fixture task's image, driven by a scripted policy through each CLI's own shell tool (real containers,
no network). Each CLI's system prompt reaches the policy with the task's instruction.md in the prompt, the
oracle (solution/solve.sh) run through the CLI's shell grades 1.0, and a run that does nothing grades 0 (those
episodes are played once for the module, several at a time, and each test checks what its own episode's steps
returned).
"""

from __future__ import annotations

import functools

import gymnasium as gym
import pytest
from episode_support import Episode, play_episodes

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
#: The CLIs whose run that does nothing is played here (each CLI's: tests/container/agent/test_agent_clis.py).
DOES_NOTHING = ["codex"]
#: How many of the module's episodes are played at a time (measured on two cores: see `episodes`).
WORKERS = 4
#: The CLIs whose episodes are played on their own: OpenCode peaks at 430-470 MB of the task's 512 MB
#: (memory_mb), and starved of CPU by other episodes its garbage collector fell behind and the kernel killed it.
ALONE = {"opencode"}


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


def oracle_actions(agent: str) -> list:
    """The oracle episode's steps: a marker, then solve.sh, through the CLI's own shell; then a text reply that ends
    the run."""
    return [shell(agent, "pwd && echo marker-$((6 * 7))"), shell(agent, TASK.solve_script.read_text()), "Done."]


@pytest.fixture(scope="module")
def episodes(cli_images) -> dict[tuple[str, str], Episode]:
    """The episodes of the two tests below, played once, one env each: ("oracle" or "nothing", agent) -> what each
    step returned. Those of ALONE's CLIs one at a time, then the others WORKERS at a time."""
    plays = {("oracle", agent): (f"oracle {agent}", functools.partial(make_env, agent), oracle_actions(agent))
             for agent in sorted(CLIS)}
    plays.update({("nothing", agent): (f"nothing {agent}", functools.partial(make_env, agent), ["Nothing to do."])
                  for agent in DOES_NOTHING})
    alone = {key: play for key, play in plays.items() if key[1] in ALONE}
    return {**play_episodes(alone, 1), **play_episodes({key: play for key, play in plays.items() if key not in alone}, WORKERS)}


@pytest.mark.parametrize("agent", sorted(CLIS))
def test_the_oracle_through_the_clis_own_shell_grades_one(cli_images, episodes, agent):
    episode = episodes["oracle", agent]
    env = episode.env
    observation, info = episode.reset()
    assert info["image"] == f"{cli_images}-{env.unwrapped.agent.image_suffix}"
    assert observation.startswith("[system]\n") and CLIS[agent][0] in observation
    assert TASK.instruction.strip().splitlines()[0] in observation
    observation, reward, terminated, truncated, info = episode.step(0)
    assert "/app\nmarker-42" in observation and not (terminated or truncated), (observation, info.get("error"))
    observation, reward, terminated, truncated, info = episode.step(1)
    assert not (terminated or truncated), (observation, info.get("error"))
    observation, reward, terminated, truncated, info = episode.step(2)
    assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
    assert reward == 1.0 and info["outcome_reason"] == "solved", info.get("report")
    assert episode.error is None, f"episode {episode.name}: {episode.error}"  # closing it raised nothing


@pytest.mark.parametrize("agent", DOES_NOTHING)
def test_a_run_that_does_nothing_grades_zero(episodes, agent):
    episode = episodes["nothing", agent]
    episode.reset()
    observation, reward, terminated, truncated, info = episode.step(0)
    assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
    assert reward == 0.0 and info["outcome_reason"] != "solved"
    assert episode.error is None, f"episode {episode.name}: {episode.error}"  # closing it raised nothing


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
