"""The coding-agent CLIs (Claude Code, Codex, OpenCode, Pi) from their derived images, driven through
SWEAgent-v0 by a scripted policy: real containers, no network.

Each agent runs on a fixture task of its own, so that every agent and every task is covered without the full
cross product (the run that changes nothing pairs them the other way round): it speaks the wire format it is
configured for, its own system prompt reaches the policy, its own shell tool round-trips (streamed, as every
one of them asks) and shows its compaction switch set, the gold patch applied through that tool grades 1.0
and a run that changes nothing grades 0 (those eight episodes are played once for the module, several at a time,
and each test checks what its own episode's steps returned). Pi past its compaction threshold sends no summary
request. Then eight agents of mixed kinds, on mixed tasks, share one ConcurrentVectorEnv.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from episode_support import Episode, play_episodes

from .agent_support import TASKS, agent_threads, own_containers, swe_agent_env
from .cli_support import CLI, CLIS, FIXTURES, gold_patch_call

pytestmark = [pytest.mark.docker, pytest.mark.slow]


#: How many of the module's episodes are played at a time (measured on two cores: see `episodes`).
WORKERS = 4


def paired(shift: int) -> list[tuple[str, str]]:
    """Each agent with a fixture task of its own, every task taken once (`shift` turns the pairing)."""
    assert len(CLIS) == len(FIXTURES), "pair every agent with one task and every task with one agent"
    tasks = [FIXTURES[(i + shift) % len(FIXTURES)] for i in range(len(CLIS))]
    return list(zip(sorted(CLIS), tasks))


def pairs(shift: int) -> list:
    return [pytest.param(agent, task, id=f"{agent}-{task.split('__')[1]}") for agent, task in paired(shift)]


def shell_call(cli: CLI, command: str) -> dict:
    """`command` as a call of the agent's own shell tool."""
    return cli.shell(command)


def patched_file(patch: str) -> str:
    return next(line[len("+++ b/"):] for line in patch.splitlines() if line.startswith("+++ b/"))


@pytest.fixture(scope="module")
def cli_images(swe_images, runtime):
    """Each CLI's derived image of every fixture image (built by .ci/setup; here if missing: a minute or two for an
    agent's first image, one COPY build of its cached npm tree for each further one)."""
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec
    from gymenvs.swe.images import image_for

    images = [image_for(TASKS[instance_id]) for instance_id in FIXTURES]
    for agent in CLIS:
        install_agent(runtime, agent_spec(agent), images, progress=False)


def make_env(agent, instance_id: str, **kwargs):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    return gym.make("gymenvs/SWEAgent-v0", agent=agent, instance_ids=[instance_id], call_timeout_s=120.0,
                    max_turns=10, **kwargs)


def tool_round_trip(request: dict, name: str) -> tuple[dict, dict]:
    """The last assistant tool call named `name` in the request's messages, and the tool result answering it."""
    messages = request["messages"]
    calls = [(i, call) for i, m in enumerate(messages) if m["role"] == "assistant" for call in m.get("tool_calls") or []
             if call["function"]["name"] == name]
    assert calls, f"no {name} call in the history: {json.dumps(messages)[-2000:]}"
    index, call = calls[-1]
    results = [m for m in messages[index + 1:] if m["role"] == "tool" and m.get("tool_call_id") == call["id"]]
    assert results, f"no tool result for {call['id']}: {json.dumps(messages[index:])[-2000:]}"
    return call, results[0]


def compaction_probe(cli: CLI) -> str:
    return f" && {cli.compaction_probe}" if cli.compaction_probe else ""


def gold_actions(agent: str, instance_id: str) -> list:
    """The gold-patch episode's steps: a marker and the compaction probe through the agent's own shell, the gold
    patch applied through it, then a text reply that ends the run."""
    cli = CLIS[agent]
    return [shell_call(cli, f"pwd && echo marker-$((6 * 7)){compaction_probe(cli)}"), gold_patch_call(cli, instance_id),
            "The issue is fixed."]


@pytest.fixture(scope="module")
def episodes(cli_images) -> dict[tuple[str, str, str], Episode]:
    """The episodes of the two tests below, played once, WORKERS at a time, one env each: ("gold" or "nothing",
    agent, instance_id) -> what each step returned. They wait mostly on the engine, the CLI's start-up and pytest
    in the container; the CLIs (Node.js) also take CPU: on two cores 4 at a time beat 2 and 3, and 8 were no faster.
    The gold episodes' envs have a warm pool: each CLI reads its task on standard input, as when the pool started
    it ahead (`test_agent_ahead.py`), the others' are started with it, as without a pool."""
    plays = {}
    for kind, shift in (("gold", 0), ("nothing", 1)):
        for agent, instance_id in paired(shift):
            actions = gold_actions(agent, instance_id) if kind == "gold" else ["Nothing to do."]
            pool = {"warm_pool": 1} if kind == "gold" else {}
            plays[kind, agent, instance_id] = (f"{kind} {agent} on {instance_id}",
                                               functools.partial(make_env, agent, instance_id, **pool), actions)
    return play_episodes(plays, WORKERS)


@pytest.mark.parametrize(("agent", "instance_id"), pairs(0))
def test_the_gold_patch_through_the_agents_own_shell_grades_one(episodes, agent, instance_id):
    cli = CLIS[agent]
    task = TASKS[instance_id]
    episode = episodes["gold", agent, instance_id]
    env = episode.env
    observation, info = episode.reset()
    assert info["image"].endswith(env.unwrapped.agent.image_suffix) and info["request"]["wire"] == cli.wire
    assert observation.startswith("[system]\n") and cli.system_prompt in observation
    assert task.problem_statement.split("\n")[0] in observation
    assert cli.shell_tool in [tool["function"]["name"] for tool in info["tools"]]
    assert info["request"]["stream"] is True  # each CLI streams by default, and gets server-sent events back

    probe = compaction_probe(cli)
    observation, reward, terminated, truncated, info = episode.step(0)
    assert "/testbed\nmarker-42" in observation and not (terminated or truncated), (observation, info.get("error"))
    assert ("compaction-off" in observation) == bool(probe), observation
    call, result = tool_round_trip(info["request"], cli.shell_tool)
    assert "marker-$((6 * 7))" in json.loads(call["function"]["arguments"])[cli.command_argument]
    assert "marker-42" in json.dumps(result["content"])

    observation, reward, terminated, truncated, info = episode.step(1)
    assert f"M {patched_file(task.patch)}" in observation and not (terminated or truncated), (observation, info.get("error"))
    observation, reward, terminated, truncated, info = episode.step(2)
    assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
    assert reward == 1.0 and info["report"]["status"] == "resolved"
    assert {record["wire"] for record in info["trajectory"]} == {cli.wire}
    assert episode.error is None, f"episode {episode.name}: {episode.error}"  # closing it raised nothing


@pytest.mark.parametrize(("agent", "instance_id"), pairs(1))
def test_a_run_that_changes_nothing_grades_zero(episodes, agent, instance_id):
    episode = episodes["nothing", agent, instance_id]
    episode.reset()
    observation, reward, terminated, truncated, info = episode.step(0)
    assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
    assert reward == 0.0 and info["report"]["status"] != "resolved" and info["patch"] == ""
    assert episode.error is None, f"episode {episode.name}: {episode.error}"  # closing it raised nothing


def test_pi_past_its_compaction_threshold_sends_no_summary_request(cli_images, tmp_path):
    """Pi compacts after a run whose last reply used more than its model's context window less 16,384 reserved
    tokens: a summary request on the main model, with the history replaced (a rewrite the policy would answer).
    With a 17,000-token window its system prompt alone is past that; its settings.json still keeps it from
    compacting, so the run ends at the policy's text reply. (Without the settings file the next step is the
    summary request: "You are a context summarization assistant...".)"""
    import dataclasses

    from gymenvs.container.agent.specs import PI

    models = json.loads(PI.file_contents()["pi-models.json"])
    models["providers"]["gymenvs"]["models"][0]["contextWindow"] = 17000
    (tmp_path / "pi-models.json").write_text(json.dumps(models))
    small_window = dataclasses.replace(PI, files=(str(tmp_path / "pi-models.json"), "pi-settings.json"))
    env = make_env(small_window, FIXTURES[0])
    try:
        env.reset()
        observation, _, terminated, _, info = env.step(shell_call(CLIS["pi"], "echo marker-$((6 * 7))"))
        assert "marker-42" in observation and not terminated
        observation, _, terminated, truncated, info = env.step("Done.")
        assert terminated and not truncated and info["exit_code"] == 0, (observation[:500], info.get("error"))
        assert [record["side"] for record in info["trajectory"]] == [None, None]  # the two main turns, nothing after
    finally:
        env.close()


def test_eight_agents_of_mixed_kinds_in_one_vector_env_without_cross_talk(cli_images, docker_client):
    import functools

    from wrappers.vector import ConcurrentVectorEnv

    kinds = [*sorted(CLIS), "reference"]
    slots = [kinds[i % len(kinds)] for i in range(8)]
    instance_ids = [FIXTURES[i % len(FIXTURES)] for i in range(8)]  # five kinds over four tasks: mixed pairs

    def factory(agent: str, instance_id: str):
        return swe_agent_env(agent=agent, instance_ids=[instance_id], call_timeout_s=120.0, max_turns=10)

    def echo(agent: str, text: str) -> dict:
        command = f"echo {text}"
        return CLIS[agent].shell(command) if agent in CLIS else {"name": "bash", "arguments": {"command": command}}

    envs = ConcurrentVectorEnv([functools.partial(factory, *slot) for slot in zip(slots, instance_ids)], backend="thread")
    try:
        observations, infos = envs.reset(seed=list(range(8)))
        assert list(infos["agent"]) == slots
        for round_ in range(2):
            observations, rewards, terminated, truncated, infos = envs.step(
                [echo(agent, f"slot-{i}-round-{round_}") for i, agent in enumerate(slots)])
            assert not terminated.any() and not truncated.any(), infos.get("error")
            for i, observation in enumerate(observations):
                assert f"slot-{i}-round-{round_}" in observation, (i, slots[i], observation)
                others = [f"slot-{j}-round-{round_}" for j in range(8) if j != i]
                assert not any(other in observation for other in others), (i, observation)
    finally:
        envs.close()
    assert not own_containers(docker_client) and not agent_threads()


KILLED = ("import gymnasium as gym, gymenvs, json, os, signal, sys\n"
          "envs, started = [], []\n"  # every env kept alive: a collected env removes its container
          "for agent, instance_id in zip(sys.argv[1::2], sys.argv[2::2]):\n"
          "    envs.append(env := gym.make('gymenvs/SWEAgent-v0', agent=agent, instance_ids=[instance_id])); env.reset()\n"
          "    started += [env.unwrapped._sandbox.name, str(env.unwrapped._channel.directory)]\n"
          "print(json.dumps(started), flush=True)\n"
          "os.kill(os.getpid(), signal.SIGKILL)\n")


def test_a_sigkilled_owner_of_every_cli_leaves_nothing_that_reap_does_not_remove(cli_images, runtime, docker_client):
    from gymenvs.container.reaper import reap

    argv = [arg for pair in zip(sorted(CLIS), FIXTURES) for arg in pair]  # each agent on a task of its own
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    result = subprocess.run([sys.executable, "-c", KILLED, *argv], capture_output=True, text=True, timeout=600, env=env)
    left = json.loads(result.stdout)
    containers, directories = left[0::2], left[1::2]
    assert len(containers) == len(CLIS) == len(directories)
    reap(runtime)
    # Another test process's first reset may reap them first (the engine's tests run on two workers): what counts is
    # that once this process has reaped, nothing the killed one left is there.
    assert not any(docker_client.containers.list(all=True, filters={"name": container}) for container in containers)
    assert not any(Path(directory).exists() for directory in directories)
