"""SWE-v0 on a two-node Ray cluster on this machine, as docs/cluster.md sets one up: a head on the first Docker engine
and a second node on an engine of its own that starts with no image and pulls them from a local registry. An
8-episode rollout runs containers on both engines; losing the second node mid-episode ends its episodes `infra`, the
rollout replays them on the head, nothing is left on the first engine, and the lost node's containers are reaped."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_support import REPOSITORY, ray_cluster, second_engine

pytestmark = [pytest.mark.slow, pytest.mark.docker]

DRIVER = Path(__file__).with_name("cluster_driver.py")


@pytest.fixture
def registry(pushed_registry):
    """The local registry holding the fixture task images, pushed from the first engine (shared with the registry test)."""
    assert pushed_registry.push.returncode == 0, pushed_registry.push.stderr
    return pushed_registry.address


def test_a_lost_node_s_episodes_are_replayed_on_the_head_and_its_containers_reaped(registry, tmp_path):
    import docker

    from gymenvs.container.reaper import reap
    from gymenvs.container.runtime import runtime_class

    output, log = tmp_path / "report.json", tmp_path / "driver.log"
    with second_engine() as engine, ray_cluster({"docker": 8}, {"docker": 4}, engine) as cluster:
        with log.open("w") as out:
            driver = subprocess.run(
                [
                    sys.executable,
                    str(DRIVER),
                    cluster.address,
                    registry,
                    str(cluster.head.pid),
                    str(cluster.node2.pid),
                    engine,
                    str(output),
                ],
                env={**os.environ, **cluster.environment},
                cwd=REPOSITORY,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=600,
            )
        assert driver.returncode == 0, log.read_text()[-4000:]
        report = json.loads(output.read_text())
        at_loss = report["seen"][0]
        on_head, on_node2 = at_loss["engine1"], at_loss["engine2"]
        assert on_head and on_node2, at_loss  # placed on both nodes, each slot on its own node's engine
        assert len(on_head) + len(on_node2) == 8
        lost = len(on_node2)
        assert report["counts"] == {"infra_failures": lost, "retries": lost, "dropped": 0}
        assert all(episode["trainable"] for episode in report["episodes"])
        head_owners = {pid for seen in report["seen"] for pid in seen["engine1"].values()}
        assert not [pid for pid in report["after_close"]["engine1"].values() if pid in head_owners]
        left_on_node2 = report["after_close"]["engine2"]
        assert set(left_on_node2) == set(on_node2)  # the lost node's containers, still there when it comes back
        node2_runtime = runtime_class("docker")(engine)  # a gymenvs process on node 2, when it comes back
        try:
            reaped = reap(node2_runtime)
        finally:
            node2_runtime.close()
        assert len(reaped) >= lost
        client = docker.DockerClient(base_url=engine)
        assert client.containers.list(all=True) == []
        client.close()
    print(
        f"\nepisodes at the loss: head {len(on_head)}, node 2 {lost}; replayed {report['counts']['retries']}; "
        f"rollout {report['seconds']} s, node 2 lost at {report['lost_after']} s; reaped on node 2: {len(reaped)}"
    )
