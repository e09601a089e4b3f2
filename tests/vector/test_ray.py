"""The Ray backend's own behaviour: actors killed from outside, per-slot resources, joining a
two-node cluster, and SWE slots played by `make_rollout_func` on Ray. (Everything the backends share runs on Ray in
test_vector_env.py, test_failures.py and test_stress.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import ray

from wrappers import ConcurrentVectorEnv

from .vector_support import REPOSITORY, faulty_echo_vector

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # a local Ray: the quick lane starts none


def ray_vector(num_envs: int = 3, **settings) -> ConcurrentVectorEnv:
    return faulty_echo_vector("ray", num_envs, max_turns=100, **settings)


def kill_with_ray(actor, pid: int) -> None:
    ray.kill(actor)


def kill_with_sigkill(actor, pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("kill", [kill_with_ray, kill_with_sigkill], ids=["ray.kill", "SIGKILL"])
def test_an_actor_killed_mid_step_truncates_its_slot_and_is_restarted(ray_session, kill):
    with ray_vector() as envs:
        envs.reset(seed=0)
        before = envs.call("whoami")
        actor = envs._backend.actor_handles()[1]
        killer = threading.Timer(1.0, kill, (actor, before[1]["pid"]))  # while slot 1 sleeps in its step
        killer.start()
        started = time.monotonic()
        observations, _, terminated, truncated, infos = envs.step(["a", "sleep 20", "b"])
        killer.join()
        assert time.monotonic() - started < 15  # noticed at once, not when the sleep would end
        assert observations[0] == "a" and observations[2] == "b"
        assert truncated.tolist() == [False, True, False] and not terminated.any()
        assert "actor died" in infos["error"][1] and infos["_error"].tolist() == [False, True, False]

        observations, *_ = envs.step(["c", "d", "e"])  # slot 1 is reset on a fresh actor, the others go on
        after = envs.call("whoami")
        assert observations[0] == "c" and observations[1] == "ready" and observations[2] == "e"
        assert after[1]["pid"] != before[1]["pid"] and after[1]["instance_id"] != before[1]["instance_id"]
        assert [after[i]["instance_id"] for i in (0, 2)] == [before[i]["instance_id"] for i in (0, 2)]
        assert envs.step(["f", "g", "h"])[0] == ("f", "g", "h")


def available(resource: str) -> float:
    return ray.available_resources().get(resource, 0.0)


def wait_for(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_each_slot_reserves_its_resources_and_gives_them_back_on_close(ray_session):
    total = ray.cluster_resources()["docker"]
    with ray_vector(num_envs=2, resources={"docker": 1}) as envs:
        envs.reset(seed=0)
        assert wait_for(lambda: available("docker") == total - 2)
    assert wait_for(lambda: available("docker") == total)


def test_slots_that_need_more_than_the_cluster_has_are_a_clear_ray_setting():
    with pytest.raises(ValueError, match="num_cpus=-1"):
        ray_vector(num_cpus=-1)
    with pytest.raises(ValueError, match="start_method=.*not a setting of this backend.*address, num_cpus"):
        ray_vector(start_method="fork")


def actor_handles(rollout) -> list:
    """The Ray actors behind a single-env rollout's vector env."""
    (vector_env,) = rollout._vector_envs.values()
    return vector_env._backend.actor_handles()


@pytest.mark.slow
@pytest.mark.docker
def test_make_rollout_func_plays_swe_slots_on_ray_and_leaves_no_container(ray_session, docker_client, swe_images):
    from gymenvs.container.runtime.owners import LABEL_PID, LABEL_ROLE
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    client = docker_client
    model, tokenizer = tiny_model(seed=0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    total = ray.cluster_resources()["docker"]
    rollout = make_rollout_func(
        "gymenvs/SWE-v0",
        env_kwargs={"max_turns": 2, "command_timeout_s": 10.0},
        backend="ray",
        vector_kwargs={"resources": {"docker": 1}},  # each SWE slot lands only where an engine runs
        max_tokens_per_turn=8,
    )

    def containers() -> list:
        pids = [str(ray.get(handle.pid.remote())) for handle in actor_handles(rollout)]
        listed = [client.containers.list(all=True, filters={"label": f"{LABEL_PID}={pid}"}, ignore_removed=True) for pid in pids]
        return [container for containers in listed for container in containers]  # (one may go while it is listed)

    try:
        episodes = rollout.run([[{"role": "user", "content": "Fix it."}]] * 4, generator, tokenizer, max_completion_length=32)
        assert len(episodes) == 4 and all(episode.turns >= 1 for episode in episodes)
        agents = [c for c in containers() if c.labels[LABEL_ROLE] != "grading"]  # a stepped episode starts its grading one
        assert len(agents) == 4  # one sandbox per slot, in four actor processes
        actor_pids = [ray.get(handle.pid.remote()) for handle in actor_handles(rollout)]
        assert len(set(actor_pids)) == 4 and os.getpid() not in actor_pids
        assert wait_for(lambda: available("docker") == total - 4)  # the Ray settings reached the actors
    finally:
        rollout.close()
    leftovers = [c for pid in actor_pids for c in client.containers.list(all=True, filters={"label": f"{LABEL_PID}={pid}"})]
    assert leftovers == []


TWO_NODE_CLUSTER = """
import json, ray
from ray.cluster_utils import Cluster
from wrappers.vector import make_vector_env

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
docker_node = cluster.add_node(num_cpus=1, resources={"docker": 2})
try:
    envs = make_vector_env("gymenvs/Echo-v0", 2, backend="ray", address=cluster.address, resources={"docker": 1})
    envs.reset(seed=0)
    observations = envs.step(["a", "b"])[0]
    nodes = [ray.get(handle.node_id.remote()) for handle in envs._backend.actor_handles()]
    envs.close()
    print(json.dumps({"observations": observations, "nodes": nodes, "docker_node": docker_node.node_id,
                      "cluster_nodes": len([node for node in ray.nodes() if node["Alive"]])}))
finally:
    ray.shutdown()
    cluster.shutdown()
"""


@pytest.mark.slow
def test_slots_join_an_existing_cluster_and_land_on_the_nodes_with_their_resource(tmp_path):
    """Two Ray nodes (Ray's own test cluster: two raylets on this machine) started before the
    vector env; `address=` joins them, and slots that need `docker` go to the node that has it."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([REPOSITORY, os.environ.get("PYTHONPATH", "")])}
    script = tmp_path / "two_nodes.py"
    script.write_text(TWO_NODE_CLUSTER)
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["cluster_nodes"] == 2
    assert report["observations"] == ["a", "b"]
    assert report["nodes"] == [report["docker_node"]] * 2
