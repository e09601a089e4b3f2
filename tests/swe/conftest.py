"""Fixtures of the SWE tests: a real Docker engine and the fixture task images, built once per session."""

from __future__ import annotations

import pytest

from gymenvs.swe.tasks import FIXTURES, load_tasks

FIXTURE_TASKS = load_tasks(FIXTURES)
FIXTURE_IDS = [task.instance_id for task in FIXTURE_TASKS]


@pytest.fixture(scope="session")
def docker_client():
    """A client of the real engine; the tests that need one skip, saying why, when none answers."""
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install 'gymenvs[swe]')")
    from gymenvs.swe.sandbox import SandboxError, docker_client

    try:
        client = docker_client()
    except SandboxError as exc:
        pytest.skip(f"no Docker engine can run here: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def swe_images(docker_client):
    """The base and fixture images (built if missing: about a minute for the base, offline from apt's mirror)."""
    from gymenvs.swe.images import BASE_IMAGE, build_base_image, build_fixture_images

    build_base_image(docker_client, tag=BASE_IMAGE, progress=False)
    build_fixture_images(docker_client, base=BASE_IMAGE, progress=False)
    return BASE_IMAGE


@pytest.fixture
def make_env(swe_images):
    """Build SWE envs for a test and close them all afterwards."""
    import gymnasium as gym

    import gymenvs  # noqa: F401

    envs = []

    def make(**kwargs):
        kwargs.setdefault("command_timeout", 20.0)
        env = gym.make("gymenvs/SWE-v0", **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def own_containers(client) -> list:
    """The SWE containers this test process owns (labelled with its pid)."""
    import os

    from gymenvs.swe.sandbox import LABEL_PID

    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"}, ignore_removed=True)
