"""The warm pool against the real Docker engine: resets take containers started ahead of time, every
episode starts pristine, pool containers are labelled like the others and removed with the last env."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest
from swe.swe_support import FIXTURE_IDS, own_containers

from gymenvs.container.pool import LABEL_POOL, WarmPool
from gymenvs.container.runtime.owners import LABEL_PID

from .tools_support import bash

pytestmark = pytest.mark.docker


def wait_for(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_warm_pool_episodes_are_pristine_labelled_and_removed_with_the_last_env(make_env, docker_client):
    env = make_env(warm_pool=2)
    other = make_env(warm_pool=2)
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    pool = env.unwrapped._pools[0]
    first = env.unwrapped.state()["container"]
    labels = docker_client.containers.get(first).labels
    assert labels[LABEL_POOL] == "1" and labels[LABEL_PID] == str(os.getpid())
    env.step(bash("echo dirty > /tmp/dirty && echo dirty >> README.md && export DIRTY=1"))
    wait_for(lambda: pool.ready() == 2)
    other.reset(options={"instance_id": FIXTURE_IDS[0]})  # a second env shares the process's pool
    assert other.unwrapped._pools == [pool] and pool.users == 2
    wait_for(lambda: pool.ready() == 2)
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    second = env.unwrapped.state()["container"]
    observation = env.step(bash("cat /tmp/dirty; git status --short; echo ${DIRTY:-clean}; pwd"))[0]
    assert second != first and observation.endswith("No such file or directory\nclean\n/testbed\n[exit code: 0]")
    wait_for(lambda: first not in {c.name for c in own_containers(docker_client)})  # used once, then removed
    env.close()
    assert pool.users == 1 and len(own_containers(docker_client)) >= 3  # the pool stays while `other` uses it
    other.close()
    assert own_containers(docker_client) == [] and WarmPool._pools == {}


def test_pool_and_pull_are_off_by_default_and_a_missing_image_says_how_to_get_it(make_env):
    env = make_env(image_template="gymenvs-missing/{swebench_id}:latest", warm_pool=2)
    assert env.unwrapped.config.pull is False and make_env().unwrapped.config.warm_pool == 0
    env.unwrapped.tasks = tuple(dataclasses.replace(task, image=None) for task in env.unwrapped.tasks)
    with pytest.raises(RuntimeError, match="is not present locally; .*or pass pull=True"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="warm_pool"):
        make_env(warm_pool=-1)


def test_the_warm_pool_doc_examples_run(swe_images, docker_client, capsys):
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "swe-warm-pool.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)
    assert len(blocks) == 2  # SWE-v0's, then SWEAgent-v0's
    for block in blocks:
        exec(compile(block, "docs/swe-warm-pool.md", "exec"), {"__name__": "doc_example"})
    assert capsys.readouterr().out.endswith("/testbed\n[exit code: 0]\n")
    assert own_containers(docker_client) == []


def test_a_pooled_container_killed_from_outside_is_replaced(make_env, docker_client):
    env = make_env(warm_pool=1)
    env.reset(options={"instance_id": FIXTURE_IDS[1]})
    pool = env.unwrapped._pools[0]
    wait_for(lambda: pool.ready() == 1)
    killed = pool._ready[0][0]
    docker_client.api.kill(killed.id)
    env.reset(options={"instance_id": FIXTURE_IDS[1]})
    assert env.unwrapped.state()["container"] != killed.name
    assert env.step(bash("echo fine"))[0] == "fine\n[exit code: 0]"
