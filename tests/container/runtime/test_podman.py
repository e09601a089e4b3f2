"""What the Podman runtime does besides driving Podman's Docker-compatible API as the Docker runtime does: it keeps
to its own engine whatever `DOCKER_HOST` and Docker's TLS settings say, an imported image gets the tag asked
(Podman 4.3 would name it `latest`), and each engine says whether it is rootless, and what it then cannot enforce.
Skipped, saying why, when no Podman engine answers (in CI a skip fails: .ci/setup starts both)."""

from __future__ import annotations

import io
import tarfile
import uuid

import pytest

from gymenvs.container.runtime import SandboxError

pytestmark = pytest.mark.docker


@pytest.fixture
def podman(monkeypatch, tmp_path):
    """A Podman runtime made while the environment names a Docker engine over TLS (whose certificates are missing:
    the docker SDK refuses to make a client of them)."""
    from gymenvs.container.runtime.podman import PodmanRuntime

    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2376")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path))
    try:
        runtime = PodmanRuntime()
    except SandboxError as exc:
        pytest.skip(f"runtime 'podman': {exc}")
    yield runtime
    runtime.close()


def test_dockers_settings_in_the_environment_do_not_reach_the_podman_runtime(podman):
    components = [component["Name"] for component in podman.client.version()["Components"]]
    assert "Podman Engine" in components, components


def test_an_imported_image_gets_the_tag_asked_and_no_other(podman):
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        member = tarfile.TarInfo("hello")
        member.size = 3
        tar.addfile(member, io.BytesIO(b"hi\n"))
    repository, tag = f"gymenvs-test/import-{uuid.uuid4().hex[:8]}", "bookworm"
    podman.import_image(iter([archive.getvalue()]), repository, tag, ["ENV GYMENVS=1", "WORKDIR /testbed"])
    try:
        assert podman.image_exists(f"{repository}:{tag}") and not podman.image_exists(f"{repository}:latest")
        config = podman.image_config(f"{repository}:{tag}")
        assert config.workdir == "/testbed" and config.environment["GYMENVS"] == "1"
    finally:
        podman.remove_image(f"{repository}:{tag}")


def test_each_engine_says_whether_it_is_rootless_and_which_limits_it_cannot_set(podman):
    from gymenvs.container.runtime.podman import PodmanRuntime

    from .runtime_support import rootless_engine

    try:
        rootless = PodmanRuntime(rootless_engine())
    except SandboxError as exc:
        pytest.skip(f"rootless Podman: {exc}")
    try:
        assert podman.info()["rootless"] is False and podman.unenforced == {} and podman.can_freeze
        info = rootless.info()
        assert info["rootless"] is True and info["engine"] == rootless_engine()
        if info["cgroup_version"] == "v1":  # this machine's: no cgroup for a rootless container
            assert set(rootless.unenforced) == {"mem_limit", "cpus", "pids_limit"} and not rootless.can_freeze
    finally:
        rootless.close()
