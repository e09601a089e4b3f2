"""Fixtures shared by every test folder: the real Docker engine and the SWE fixture images."""

from __future__ import annotations

import pytest


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
