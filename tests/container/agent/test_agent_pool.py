"""SWEAgent-v0's warm pool against the real Docker engine: pooled containers bind nothing of the host; an
episode writes its own files into the container it takes and opens its own channel; nothing is shared
between episodes, and nothing is left after close, or after the owner is SIGKILLed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.agent.specs import MOUNT
from gymenvs.container.pool import LABEL_POOL, WarmPool
from gymenvs.container.runtime.owners import LABEL_ROLE

from .agent_support import NEXT_PROCESS, SUBMIT, TASKS, agent_threads, apply_patch, bash, own_containers

pytestmark = pytest.mark.docker


def wait_for(condition, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def own_directories() -> set[str]:
    """This process's channel directories on the host."""
    return {str(p) for p in Path(tempfile.gettempdir()).glob(f"gymenvs-agent-{os.getpid()}-*")}


def mounts(docker_client, container: str) -> list:
    return docker_client.api.inspect_container(container)["Mounts"]


def has_agent_files(docker_client, container: str) -> bool:
    return docker_client.containers.get(container).exec_run(["test", "-e", MOUNT]).exit_code == 0


def test_a_pooled_episode_with_the_gold_patch_grades_one(make_agent_env, docker_client):  # noqa: F811
    task = TASKS[FIXTURE_IDS[0]]
    env = make_agent_env(warm_pool=1)
    observation, info = env.reset(options={"instance_id": task.instance_id})
    agent_env = env.unwrapped
    container = agent_env.state()["container"]
    assert docker_client.containers.get(container).labels[LABEL_POOL] == "1"  # it came from the pool
    assert mounts(docker_client, container) == []  # the agent's files and channel come through the engine's API
    assert task.problem_statement.split("\n")[0] in observation
    env.step(apply_patch(task.patch))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert terminated and info["exit_code"] == 0, info.get("error")
    assert reward == 1.0 and info["report"]["status"] == "resolved"


def test_consecutive_pooled_episodes_never_see_each_others_files(make_agent_env, docker_client):  # noqa: F811
    env = make_agent_env(warm_pool=2)
    agent_env = env.unwrapped
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    pool = agent_env._pools[0]
    first_container, first = agent_env.state()["container"], agent_env._channel.directory
    wait_for(lambda: pool.ready() == 2)
    waiting = {warm.sandbox.name for warm in pool._ready}
    env.reset(options={"instance_id": FIXTURE_IDS[0]})  # the same image: the same pool
    second_container, second = agent_env.state()["container"], agent_env._channel.directory
    assert second_container in waiting and second_container != first_container
    assert second != first and not first.exists()  # the first episode's channel went with it
    # Inside, the second episode sees exactly the files written for it, and no socket of the host.
    seen = env.step(bash(f"ls -A {MOUNT}"))[0]
    assert seen == "[tool] (bash)\nreference_agent.py\ntask.md\n[exit code: 0]"
    # The waiting containers hold nothing of an episode yet (the step started the episode's grading container too).
    def pooled():
        return [c for c in own_containers(docker_client) if c.labels.get(LABEL_ROLE) != "grading"]

    wait_for(lambda: pool.ready() == 2 and len(pooled()) == 3)  # the first one removed
    waiting = [c.id for c in pooled() if c.name != second_container]
    assert len(waiting) == 2 and not any(has_agent_files(docker_client, c) for c in waiting)


def test_nothing_is_left_after_close(make_agent_env, docker_client):  # noqa: F811
    env = make_agent_env(warm_pool=2)
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    pool = env.unwrapped._pools[0]
    wait_for(lambda: pool.ready() == 2)
    assert len(own_containers(docker_client)) == 3 and len(own_directories()) == 1  # the episode's channel
    env.close()
    assert not own_containers(docker_client) and not own_directories() and not agent_threads()
    assert WarmPool._pools == {}


POOLED_THEN_KILLED = ("import gymnasium as gym, gymenvs, json, os, signal, time\n"
                      "env = gym.make('gymenvs/SWEAgent-v0', warm_pool=2); env.reset(seed=0)\n"
                      "pool = env.unwrapped._pools[0]\n"
                      "while pool.ready() < 2: time.sleep(0.1)\n"
                      "started = [env.unwrapped._sandbox] + [warm.sandbox for warm in pool._ready]\n"
                      "directories = [env.unwrapped._channel.directory]\n"
                      "print(json.dumps([[s.name for s in started], [str(d) for d in directories]]), flush=True)\n"
                      "os.kill(os.getpid(), signal.SIGKILL)\n")


def test_a_sigkilled_owner_leaves_nothing_the_next_process_does_not_reap(swe_images, docker_client):
    result = subprocess.run([sys.executable, "-c", POOLED_THEN_KILLED], capture_output=True, text=True, timeout=300)
    containers, directories = json.loads(result.stdout)
    assert len(containers) == 3 and len(directories) == 1
    result = subprocess.run([sys.executable, "-c", NEXT_PROCESS], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # Another test process's first reset may reap them first (the engine's tests run on two workers): what counts is
    # that once the next process has reset, nothing the killed one left is there.
    assert not any(docker_client.containers.list(all=True, filters={"name": c}) for c in containers)
    assert not any(Path(d).exists() for d in directories)
