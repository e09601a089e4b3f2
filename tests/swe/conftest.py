"""Fixtures of the SWE tests: a real Docker engine and the fixture task images, built once per session."""

from __future__ import annotations

import pytest

from gymenvs.swe.tasks import FIXTURES, load_tasks

FIXTURE_TASKS = load_tasks(FIXTURES)
FIXTURE_IDS = [task.instance_id for task in FIXTURE_TASKS]


@pytest.fixture
def make_env(swe_images):
    """Build SWE envs for a test and close them all afterwards."""
    import gymnasium as gym

    import gymenvs  # noqa: F401

    envs = []

    def make(**kwargs):
        kwargs.setdefault("command_timeout_s", 20.0)
        env = gym.make("gymenvs/SWE-v0", **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def own_containers(client) -> list:
    """The SWE containers this test process owns (labelled with its pid)."""
    import os

    from gymenvs.container.runtime.owners import LABEL_PID

    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"}, ignore_removed=True)
