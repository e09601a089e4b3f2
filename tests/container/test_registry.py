"""Images through a registry: `--push REGISTRY` of the image commands pushes them; an env with `registry=` on an engine
that lacks an image pulls it from there and tags it under its own name. The engine is a second dockerd that starts
with no image (tests/cluster_support.py), the registry Debian's `docker-registry`; the push (the `pushed_registry`
fixture) is shared with the Ray cluster test."""

import subprocess

import pytest
from cluster_support import CLI, REPOSITORY, second_engine


def test_push_refuses_what_is_no_registry_before_reaching_an_engine():
    refused = subprocess.run(
        [*CLI, "swe", "build-images", "--push", "http://127.0.0.1:5000"], cwd=REPOSITORY, capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert "'http://127.0.0.1:5000' is no registry: give host:port or host:port/prefix" in refused.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_an_engine_without_the_image_pulls_it_from_the_registry_the_build_command_pushed_to(pushed_registry):
    import docker
    import gymnasium as gym

    from gymenvs.container.images import ensure_image
    from gymenvs.container.runtime import ImageMissing, runtime_class

    registry = pushed_registry.address
    assert pushed_registry.push.returncode == 0, pushed_registry.push.stderr
    assert f"pushed {registry}/gymenvs/swe-base:bookworm" in pushed_registry.push.stdout
    with second_engine() as engine:
        without = gym.make("gymenvs/SWE-v0", engine=engine)
        with pytest.raises(ImageMissing, match="is not present locally; build the fixture images"):
            without.reset(seed=0)
        without.close()

        node2 = runtime_class("docker")(engine)
        with pytest.raises(ImageMissing, match=f"not present locally and not in registry '{registry}'.*--push REGISTRY"):
            ensure_image(node2, "gymenvs/never-pushed:1", registry=registry)
        node2.close()

        env = gym.make("gymenvs/SWE-v0", engine=engine, registry=registry, max_turns=1)
        try:
            observation, _ = env.reset(seed=0)
            assert "/testbed" in observation
            image = env.unwrapped.image.name
        finally:
            env.close()
        client = docker.DockerClient(base_url=engine)
        try:
            assert client.images.get(image).tags == sorted([image, f"{registry}/{image}"])
            assert client.containers.list(all=True) == []
        finally:
            client.close()
