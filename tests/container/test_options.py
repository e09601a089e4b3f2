"""The container env options that change what the engine does, each run on the real engine and checked by its
effect, not by the arguments it passed: `grade_as_root` (who runs the tests), `network` (whether the
agent's container reaches a port on the host) and `disk_limit` (the engine's `storage_opt` where the
storage driver takes it, else the watch: either way a write past the limit stops)."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from swe.swe_support import FIXTURE_TASKS

from gymenvs.container.runtime import DiskLimitExceeded, Limits
from gymenvs.container.shell import PersistentShell
from gymenvs.swe.tasks import fixtures_path

from .tools_support import bash

pytestmark = pytest.mark.docker
TASK = next(task for task in FIXTURE_TASKS if task.instance_id == "gymenvs-fixtures__textkit-1")


def dataset_with_test_cmd(tmp_path, test_cmd: str) -> str:
    """A one-row dataset: the textkit fixture task with its tests run by `test_cmd`."""
    rows = [json.loads(line) for line in (fixtures_path() / "tasks.jsonl").read_text().splitlines()]
    row = next(row for row in rows if row["instance_id"] == TASK.instance_id)
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**row, "test_cmd": test_cmd}) + "\n")
    return str(path)


@pytest.mark.parametrize(("grade_as_root", "uid"), [(True, "0"), (False, "65534")])
def test_grade_as_root_runs_the_tests_as_root(make_env, tmp_path, grade_as_root, uid):
    test_cmd = 'pytest -rA; code=$?; echo "grading uid: $(id -u)"; exit $code'
    env = make_env(dataset=dataset_with_test_cmd(tmp_path, test_cmd), grade_as_root=grade_as_root)
    env.reset(options={"instance_id": TASK.instance_id})
    _, _, terminated, _, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and info["status"] == "unresolved", info.get("error")  # the tests ran, on the unfixed code
    assert f"grading uid: {uid}\n" in info["report"]["log_tail"]


@pytest.fixture
def host_port():
    """A port on every host address, the bridge's gateway included, that records who connected."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(60)
    accepted: list[str] = []

    def accept() -> None:
        try:
            connection, (address, _) = server.accept()
        except OSError:
            return
        accepted.append(address)
        connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted, thread
    try:
        server.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept() at once (close alone leaves it waiting)
    except OSError:
        pass
    server.close()
    thread.join(5)


# The container's default gateway (the host, on Docker's bridge), read from /proc: no `ip` in the image.
CONNECT = """python3 -c '
import socket, struct, sys
routes = [line.split() for line in open("/proc/net/route").read().splitlines()[1:]]
gateways = [socket.inet_ntoa(struct.pack("<L", int(r[2], 16))) for r in routes if r[1] == "00000000"]
if not gateways:
    sys.exit("no route to the host")
socket.create_connection((gateways[0], {port}), 10).close()
print("connected to", gateways[0])'"""


@pytest.mark.parametrize("network", [True, False])
def test_network_decides_whether_the_container_reaches_the_host(make_env, host_port, network):
    port, accepted, accepting = host_port
    env = make_env(network=network)
    env.reset(options={"instance_id": TASK.instance_id})
    observation = env.step(bash(CONNECT.format(port=port)))[0]
    if network:
        accepting.join(30)
        assert "connected to" in observation and len(accepted) == 1  # the host saw the container connect
    else:
        assert "no route to the host" in observation and not accepted


def test_writing_past_the_disk_limit_stops_it(runtime, docker_client, swe_images):
    """Six 10 MiB writes against a 20 MiB limit, then three seconds of quiet, whatever the host:
    the engine refuses the write (storage_opt), or the watch, which looks every second, stops the command."""
    box = runtime.start(swe_images, role="test", episode_id="disk", limits=Limits(disk_limit=20 << 20))
    try:
        host_config = docker_client.api.inspect_container(box.id)["HostConfig"]
        assert bool(host_config.get("StorageOpt")) == box.disk_capped  # what the engine took, not what was asked
        write = "set -e; for i in 1 2 3 4 5 6; do head -c 10M /dev/zero > /big.$i; done; sleep 3; echo wrote-them-all"
        if box.disk_capped:
            result = box.run(write, timeout=120)
            assert result.exit_code not in (0, None) and "No space left on device" in result.output.text()
        else:
            with pytest.raises(DiskLimitExceeded, match="more than its disk limit of 20 MiB"):
                box.run(write, timeout=120)
            with pytest.raises(DiskLimitExceeded):  # and so is the shell, from then on
                PersistentShell(box).run("true", 5)
    finally:
        box.remove()


def test_a_step_never_waits_for_the_engine_to_size_the_layer(runtime, swe_images):
    """Where the watch looks (no storage_opt), the size requests run in the runtime's watch thread, never in the
    thread stepping the episode: an engine slow to size a layer (Podman's service, about 25 ms a container and one
    at a time) cannot hold up a command."""
    box = runtime.start(swe_images, role="test", episode_id="disk-watch", limits=Limits(disk_limit=20 << 20))
    sized_in: list[str] = []

    def record(response, *args, **kwargs):
        if "size=" in response.url and "size=0" not in response.url:
            sized_in.append(threading.current_thread().name)
        return response

    hooks = runtime.client.api.hooks["response"]
    hooks.append(record)
    try:
        if box.disk_capped:
            pytest.skip("the engine caps the layer itself here: nothing is watched")
        shell = PersistentShell(box)
        for _ in range(6):  # three seconds of commands: about three looks
            shell.run("sleep 0.5", 5)
    finally:
        hooks.remove(record)
        box.remove()
    assert sized_in and set(sized_in) == {f"gymenvs-disk-watch-{runtime.name}"}, sized_in
