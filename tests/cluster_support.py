"""Real parts of a small cluster on one machine, for the registry and Ray cluster tests: a local registry (Debian's
`docker-registry`), a second Docker engine that starts with no image, and a two-node Ray cluster with token
authentication. Each is a context manager that leaves nothing behind: processes, bridge, folders."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: The second engine's socket, as docs/cluster.md names it.
NODE2_SOCKET = "/run/gymenvs-node2/docker.sock"
NODE2_ENGINE = f"unix://{NODE2_SOCKET}"
#: Its own bridge and subnet: with `--bridge=none` a second dockerd deletes the host's docker0.
NODE2_BRIDGE = "gymenvs-n2br"
NODE2_SUBNET = "172.31.250.1/24"
REPOSITORY = Path(__file__).resolve().parents[1]
TESTS = REPOSITORY / "tests"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until(ready, what: str, timeout_s: float, log: Path | None = None, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (process is None or process.poll() is None):
        if ready():
            return
        time.sleep(0.2)
    tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
    raise RuntimeError(f"{what} did not start (or exited) within {timeout_s:g} s{': ' + tail if tail else ''}")


def _stop(process: subprocess.Popen, timeout_s: float = 30) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def local_registry() -> Iterator[str]:
    """Debian's `docker-registry` on a free localhost port, storing in a temporary folder; its address
    ("127.0.0.1:PORT": every Docker engine counts 127.0.0.0/8 as an insecure registry it may use over HTTP)."""
    if shutil.which("docker-registry") is None:
        raise RuntimeError("docker-registry is not installed (apt-get install docker-registry; .ci/setup does)")
    with tempfile.TemporaryDirectory(prefix="gymenvs-registry-") as folder:
        address = f"127.0.0.1:{free_port()}"
        config = Path(folder) / "config.yml"
        config.write_text(
            f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {folder}/data\n"
            f"  delete:\n    enabled: true\nhttp:\n  addr: {address}\n"
        )
        log = Path(folder) / "log"
        with log.open("w") as out:
            process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_until(lambda: _answers(f"http://{address}/v2/"), "docker-registry", 20, log, process)
            yield address
        finally:
            _stop(process)


#: The `gymenvs` command, as a user runs it.
CLI = [sys.executable, "-c", "import sys; from gymenvs.cli import main; sys.exit(main())"]


@dataclass
class PushedRegistry:
    """A registry the SWE images were pushed to, and what the push command said."""

    address: str
    push: subprocess.CompletedProcess


def push_swe_images(registry: str) -> PushedRegistry:
    """Run `swe build-images --push REGISTRY`, as a user would, pushing the base and fixture images there."""
    command = [*CLI, "swe", "build-images", "--quiet", "--push", registry]
    return PushedRegistry(registry, subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=300))


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def second_engine() -> Iterator[str]:
    """A second dockerd with its own bridge, data root, exec root, pid file and socket (`NODE2_ENGINE`), and no
    image; stopped, its bridge and folders removed, at the end. It leaves iptables to the first engine (its
    containers run without network, as SWE-v0's do)."""
    import docker

    run = Path(NODE2_SOCKET).parent
    data = Path(tempfile.mkdtemp(prefix="gymenvs-node2-"))
    _run(["ip", "link", "add", NODE2_BRIDGE, "type", "bridge"])
    try:
        _run(["ip", "addr", "add", NODE2_SUBNET, "dev", NODE2_BRIDGE])
        _run(["ip", "link", "set", NODE2_BRIDGE, "up"])
        run.mkdir(parents=True, exist_ok=True)
        log = data / "dockerd.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [
                    "dockerd",
                    f"--bridge={NODE2_BRIDGE}",
                    "--iptables=false",
                    "--ip6tables=false",
                    f"--data-root={data / 'root'}",
                    f"--exec-root={run / 'exec'}",
                    f"--pidfile={run / 'docker.pid'}",
                    f"-H={NODE2_ENGINE}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_until(lambda: _engine_answers(docker), "the second dockerd", 60, log, process)
            yield NODE2_ENGINE
        finally:
            _remove_all_containers(docker)
            _stop(process)
    finally:
        _run(["ip", "link", "delete", NODE2_BRIDGE], check=False)
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


def _run(command: list[str], check: bool = True) -> None:
    subprocess.run(command, check=check, capture_output=True)


def _engine_answers(docker) -> bool:
    try:
        client = docker.DockerClient(base_url=NODE2_ENGINE)
    except docker.errors.DockerException:
        return False
    try:
        return client.ping()
    except docker.errors.DockerException:
        return False
    finally:
        client.close()


def _remove_all_containers(docker) -> None:
    client = docker.DockerClient(base_url=NODE2_ENGINE)
    try:
        for container in client.containers.list(all=True):
            container.remove(force=True)
    finally:
        client.close()


@dataclass
class RayCluster:
    """A head and a second node, each a `ray start --block` (the parent of its raylet, which starts the workers)."""

    address: str
    #: What a driver needs in its environment: the token settings, and the worktree on its path.
    environment: dict[str, str]
    head: subprocess.Popen
    node2: subprocess.Popen


@contextmanager
def ray_cluster(head_resources: Mapping[str, int], node2_resources: Mapping[str, int], node2_engine: str) -> Iterator[RayCluster]:
    """A two-node Ray cluster on this machine, with token authentication: the token in a file every process names
    (RAY_AUTH_TOKEN_PATH) and RAY_AUTH_MODE=token everywhere. Its temp folder is its own, so a plain `ray.init()` of
    another process never finds it. The second node's workers use `node2_engine` (its DOCKER_HOST)."""
    import json

    ray = str(Path(sys.executable).parent / "ray")
    with tempfile.TemporaryDirectory(prefix="grc-") as folder:  # short: Ray's socket paths live under it
        token = Path(folder) / "token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        environment = {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPOSITORY)]),
        }
        base = {**os.environ, **environment}
        base.pop("DOCKER_HOST", None)
        port = free_port()
        common = [
            "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--object-store-memory=100000000",
            "--disable-usage-stats",
        ]
        head = _ray_start(
            [
                ray,
                "start",
                "--head",
                f"--port={port}",
                f"--temp-dir={folder}/tmp",
                "--include-dashboard=false",
                f"--resources={json.dumps(dict(head_resources))}",
                *common,
            ],
            base,
            Path(folder) / "head.log",
        )
        node2 = None
        try:
            address = f"127.0.0.1:{port}"
            _wait_until(lambda: _nodes(ray, address, base) >= 1, "the Ray head", 60, Path(folder) / "head.log", head)
            joining = [ray, "start", f"--address={address}", f"--resources={json.dumps(dict(node2_resources))}", *common]
            node2 = _ray_start(joining, {**base, "DOCKER_HOST": node2_engine}, Path(folder) / "node2.log")
            _wait_until(lambda: _nodes(ray, address, base) >= 2, "the second Ray node", 60, Path(folder) / "node2.log", node2)
            yield RayCluster(address, environment, head, node2)
        finally:
            for process in (node2, head):
                if process is not None:
                    kill_tree(process.pid)
                    process.wait()


def _ray_start(command: list[str], environment: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(command, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _nodes(ray: str, address: str, environment: dict[str, str]) -> int:
    """How many nodes `ray status` counts as alive (0 while the head does not answer)."""
    answer = subprocess.run([ray, "status", f"--address={address}"], env=environment, capture_output=True, text=True)
    if answer.returncode != 0:
        return 0
    active = answer.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
    return sum(1 for line in active.splitlines() if line.strip().startswith("1 node_"))


def kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every process under it, with no cleanup: how a node is lost (Ray's workers are the raylet's
    children, each in a process group of its own, so killing the `ray start` session spares them)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for process in processes:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=10)
