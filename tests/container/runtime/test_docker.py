"""The container sandbox and the persistent shell against the real Docker engine: state, timeouts,
output limits, labels and limits, cleanup, and reaping the containers of killed processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gymenvs.swe.sandbox import (
    KEPT_CAPABILITIES,
    LABEL_EPISODE,
    LABEL_HOST,
    LABEL_PID,
    SECURITY_OPTIONS,
    ContainerGone,
    DockerSandbox,
    Limits,
    owner_labels,
    reap_orphans,
)
from gymenvs.container.shell import PersistentShell

from swe.swe_support import own_containers

pytestmark = pytest.mark.docker
TIMEOUT = 3.0
GRACE = 2.0  # the shell's kill_grace
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def sandbox(docker_client, swe_images):
    box = DockerSandbox(docker_client, swe_images, role="test", episode_id="sandbox-tests", limits=Limits(pids_limit=256))
    yield box
    box.remove()


@pytest.fixture
def shell(sandbox):
    shell = PersistentShell(sandbox, output_limit=2000, kill_grace=GRACE)
    yield shell
    shell.close()


def processes(sandbox: DockerSandbox, name: str) -> int:
    """How many processes called `name` run in the container (read from /proc: no procps needed)."""
    result = sandbox.run(f"grep -lx {name} /proc/[0-9]*/comm 2>/dev/null | wc -l", timeout=10)
    return int(result.output.text())


def test_state_carries_over_between_commands(shell):
    state = "cd /tmp && export GREETING=hello && count=3 && greet() { echo \"$GREETING x$count\"; }"
    assert shell.run(state, TIMEOUT).exit_code == 0
    result = shell.run("pwd; greet", TIMEOUT)
    assert result.output == "/tmp\nhello x3\n" and result.exit_code == 0
    assert shell.run("false", TIMEOUT).exit_code == 1


def test_commands_cannot_read_the_shells_input_or_break_its_framing(shell):
    assert shell.run("cat; read line; echo after", TIMEOUT).output == "after\n"  # stdin is empty
    unbalanced = shell.run("echo 'unterminated", TIMEOUT)
    assert unbalanced.exit_code == 2 and "unexpected EOF" in unbalanced.output
    fake = shell.run("printf '\\n__gymenvs_done_0000__ 0\\nstill running\\n'; echo $'tab\\there'", TIMEOUT)
    assert fake.output.endswith("still running\ntab\there\n") and fake.exit_code == 0
    multi = shell.run("cat <<'EOF'\nline one\n'quoted' \\\\ $HOME\nEOF", TIMEOUT)
    assert multi.output == "line one\n'quoted' \\\\ $HOME\n"


@pytest.mark.parametrize("command", ["sleep 1000", "yes", "sleep 1000 & sleep 2000"])
@pytest.mark.slow
def test_a_command_that_never_ends_is_stopped_at_the_timeout(shell, sandbox, command):
    shell.run("cd /tmp", TIMEOUT)
    started = time.monotonic()
    result = shell.run(command, TIMEOUT)
    elapsed = time.monotonic() - started
    assert result.timed_out and elapsed >= TIMEOUT  # not stopped early (how soon after is load-dependent: not asserted)
    assert not result.restarted and result.exit_code == 143  # SIGTERM, inside the container
    assert len(result.output) < 2200  # `yes` streamed gigabytes; the head and tail were kept
    assert processes(sandbox, "sleep") == 1 and processes(sandbox, "yes") == 0  # only the container's own sleep
    assert shell.run("pwd", TIMEOUT).output == "/tmp\n"  # the same shell goes on


@pytest.mark.slow
def test_a_process_ignoring_sigterm_is_killed(shell, sandbox):
    ignore = ("python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print(\"up\", flush=True); time.sleep(1000)'")
    result = shell.run(ignore, TIMEOUT)
    assert result.timed_out and result.exit_code == 137 and result.output.startswith("up\n")
    assert processes(sandbox, "python3") == 0


@pytest.mark.slow
def test_a_busy_shell_builtin_is_stopped_by_replacing_the_shell(shell):
    shell.run("cd /tmp && export KEPT=no", TIMEOUT)
    result = shell.run("while :; do :; done", TIMEOUT)  # never ending: a hang here is pytest-timeout's to report
    assert result.timed_out and result.restarted and result.exit_code is None
    assert "a new shell was started" in result.output
    assert shell.run("pwd; echo ${KEPT:-reset}", TIMEOUT).output == "/testbed\nreset\n"


def test_exit_starts_a_new_shell(shell):
    result = shell.run("exit 3", TIMEOUT)
    assert result.restarted and not result.timed_out and "the shell exited" in result.output
    assert shell.run("echo alive", TIMEOUT).output == "alive\n"


def test_huge_binary_and_invalid_utf8_output_is_capped_and_decoded(shell):
    huge = shell.run("head -c 30000000 /dev/zero | tr '\\0' 'a'; echo; echo END", TIMEOUT * 3)
    assert huge.exit_code == 0 and huge.output.startswith("a" * 1000) and huge.output.endswith("a\nEND\n")
    assert f"[... {30_000_005 - 2000} bytes of output elided ...]" in huge.output
    binary = shell.run("head -c 100000 /dev/urandom", TIMEOUT)
    assert binary.exit_code == 0 and len(binary.output) < 2200 and "\x00" not in binary.output
    binary.output.encode("utf-8")
    invalid = shell.run("printf 'caf\\xc3\\xa9 \\xff\\xfe end'", TIMEOUT)
    assert invalid.output == "café \ufffd\ufffd end"


def test_containers_are_labelled_limited_and_offline(docker_client, sandbox):
    attrs = docker_client.api.inspect_container(sandbox.id)
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_PID] == str(os.getpid()) and labels[LABEL_HOST] == owner_labels()[LABEL_HOST]
    assert labels[LABEL_EPISODE] == "sandbox-tests"
    host = attrs["HostConfig"]
    assert host["Init"] is True and host["NetworkMode"] == "none" and host["PidsLimit"] == 256
    assert host["CapDrop"] == ["ALL"] and set(host["CapAdd"]) == set(KEPT_CAPABILITIES)
    assert host["SecurityOpt"] == list(SECURITY_OPTIONS)
    assert host["Memory"] == 2 << 30 and host["NanoCpus"] == 1_000_000_000
    offline = sandbox.run("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), timeout=2)'", timeout=10)
    assert offline.exit_code == 1 and "Network is unreachable" in offline.output.text()


def test_a_container_killed_from_outside_is_reported(docker_client, swe_images):
    box = DockerSandbox(docker_client, swe_images, role="test", episode_id="kill-test")
    shell = PersistentShell(box)
    docker_client.api.kill(box.id)
    with pytest.raises(ContainerGone, match="killed from outside"):
        shell.run("echo hi", TIMEOUT)
    box.remove()
    assert box.id not in [c.id for c in own_containers(docker_client)]


OWNER = textwrap.dedent("""
    import sys, time
    from gymenvs.swe.sandbox import DockerSandbox, docker_client
    box = DockerSandbox(docker_client(), sys.argv[1], role="test", episode_id=sys.argv[2])
    print(box.id, flush=True)
    time.sleep(600)
""")


def start_owner(image: str, episode: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-c", OWNER, image, episode], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": ROOT})
    return process, process.stdout.readline().strip()


NEXT_PROCESS = textwrap.dedent("""
    import gymnasium as gym, gymenvs
    from gymenvs.swe.sandbox import docker as sandbox
    calls = []
    reap = sandbox.reap_orphans
    sandbox.reap_orphans = lambda client: calls.append(1) or reap(client)
    envs = [gym.make("gymenvs/SWE-v0") for _ in range(3)]
    assert not sandbox._shared_clients and not calls  # constructing touches no engine
    for env in envs:
        env.reset(seed=0)
    print(len(calls), " ".join(envs[0].unwrapped.reaped))
    for env in envs:
        env.close()
""")


def test_orphans_of_killed_processes_are_reaped_once_by_the_next_process_and_live_ones_kept(docker_client, swe_images):
    dead, dead_id = start_owner(swe_images, "orphan")
    alive, alive_id = start_owner(swe_images, "still-owned")
    try:
        dead.send_signal(signal.SIGKILL)  # no atexit, no finalizer: the container stays behind
        dead.wait(30)
        assert docker_client.containers.get(dead_id).status == "running"
        result = subprocess.run([sys.executable, "-c", NEXT_PROCESS], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "PYTHONPATH": ROOT})
        assert result.returncode == 0, result.stderr
        calls, reaped = result.stdout.split(" ", 1)
        assert calls == "1" and docker_client.containers.get(alive_id).name not in reaped  # 3 envs, one reaping
        remaining = {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}
        assert dead_id not in remaining and alive_id in remaining
        assert reap_orphans(docker_client) == []
    finally:
        alive.kill()
        alive.wait(30)
        docker_client.api.remove_container(alive_id, force=True)


def test_containers_are_removed_at_exit_without_close(docker_client, swe_images):
    code = OWNER.replace("time.sleep(600)", "")  # exits normally with the sandbox still referenced
    result = subprocess.run([sys.executable, "-c", code, swe_images, "atexit"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr
    container_id = result.stdout.strip()
    assert container_id and container_id not in {c.id for c in docker_client.containers.list(all=True, ignore_removed=True)}


def test_no_new_privileges_and_no_raw_sockets_or_device_nodes(sandbox):
    status = sandbox.run("grep NoNewPrivs /proc/self/status; mknod /tmp/mem c 1 1; echo mknod=$?", timeout=10).output.text()
    assert "NoNewPrivs:\t1" in status and "mknod=1" in status
    raw_socket = "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'"
    raw = sandbox.run(raw_socket, timeout=10)
    assert raw.exit_code == 1 and "Operation not permitted" in raw.output.text()


def test_the_hardening_still_lets_root_reach_a_bind_mounted_unix_socket(docker_client, swe_images, tmp_path):
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "agent.sock"))
    server.listen(1)
    os.chown(tmp_path / "agent.sock", 12345, 12345)  # another user's socket, mode 0600: needs DAC_OVERRIDE
    os.chmod(tmp_path / "agent.sock", 0o600)
    client = "import socket; s = socket.socket(socket.AF_UNIX); s.connect('/sock/agent.sock'); s.sendall(b'hello')"
    container = docker_client.containers.run(
        swe_images, ["python3", "-c", client], detach=True, labels={LABEL_PID: str(os.getpid())},
        volumes={str(tmp_path): {"bind": "/sock", "mode": "ro"}}, network_mode="none",
        cap_drop=["ALL"], cap_add=list(KEPT_CAPABILITIES), security_opt=list(SECURITY_OPTIONS))
    try:
        server.settimeout(60)
        connection, _ = server.accept()
        assert connection.recv(5) == b"hello"
        assert container.wait(timeout=60)["StatusCode"] == 0
    finally:
        container.remove(force=True)
        server.close()


@pytest.mark.slow
def test_a_timeout_kills_double_forked_jobs_and_a_fork_bomb(docker_client, swe_images):
    box = DockerSandbox(docker_client, swe_images, role="test", episode_id="kill-all", limits=Limits(pids_limit=128))
    shell = PersistentShell(box, kill_grace=GRACE)
    try:
        escaped = shell.run("(setsid sleep 1001 &); (nohup sleep 1002 >/dev/null 2>&1 &); sleep 1000", TIMEOUT)
        assert escaped.timed_out and processes(box, "sleep") == 1  # only the container's own sleep is left
        bomb = shell.run("bomb() { bomb | bomb & }; bomb; sleep 1000", TIMEOUT)
        assert bomb.timed_out
        assert shell.run("echo alive", TIMEOUT).output.endswith("alive\n")  # after what the bomb printed as it died
        left = box.run("ls -d /proc/[0-9]* | wc -l", timeout=10).output.text()
        assert int(left) < 12  # init, sleep, the shell and this count's few: the bomb's 128 are gone
    finally:
        shell.close()
        box.remove()


SIGTERMED = textwrap.dedent("""
    import time, gymnasium as gym, gymenvs
    env = gym.make("gymenvs/SWE-v0")
    env.reset(seed=0)
    print(env.unwrapped.state()["container"], flush=True)
    time.sleep(600)
""")


def test_sigterm_removes_the_containers_of_the_process(docker_client, swe_images):
    process = subprocess.Popen([sys.executable, "-c", SIGTERMED], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": ROOT})
    name = process.stdout.readline().strip()
    assert docker_client.containers.get(name).status == "running"
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == -signal.SIGTERM  # it still dies of the signal, as its supervisor expects
    assert name not in {c.name for c in docker_client.containers.list(all=True, ignore_removed=True)}


def test_a_snapshot_starts_a_sandbox_where_the_first_stood(docker_client, swe_images):
    first = DockerSandbox(docker_client, swe_images, role="test", episode_id="snapshot")
    try:
        first.run("echo kept > /testbed/kept.txt", timeout=10)
        image = first.snapshot("gymenvs/swe-test-snapshot", first.id[:12])
    finally:
        first.remove()
    try:
        second = DockerSandbox(docker_client, image, role="test", episode_id="snapshot")
        try:
            assert second.read_file("/testbed/kept.txt", 100)[0] == b"kept\n"
        finally:
            second.remove()
    finally:
        docker_client.images.remove(image, force=True)


def test_docker_sandbox_is_a_sandbox(sandbox):
    from gymenvs.swe.sandbox import Sandbox

    assert isinstance(sandbox, Sandbox)  # every method and attribute of the protocol is there
