"""The Docker runtime's sandbox and the persistent shell against the real Docker engine: state, timeouts,
output limits, labels and limits, hardening, cleanup at exit, snapshots. (Reaping what killed processes left:
tests/container/test_reaper.py.)"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from episode_support import play_all
from swe.swe_support import own_containers

from gymenvs.container.runtime import ContainerGone, Limits, Runtime, Sandbox, SandboxError
from gymenvs.container.runtime.docker.sandbox import HOSTS_PATH, KEPT_CAPABILITIES, SECURITY_OPTIONS, DockerSandbox
from gymenvs.container.runtime.owners import LABEL_EPISODE, LABEL_HOST, LABEL_PID, owner_labels
from gymenvs.container.shell import PersistentShell, ShellSandbox
from gymenvs.swe.images import WORKDIR

pytestmark = pytest.mark.docker
TIMEOUT = 3.0
GRACE = 2.0  # the shell's kill_grace
ROOT = str(Path(__file__).resolve().parents[3])


@pytest.fixture(scope="module")
def sandbox(runtime, swe_images):
    box = runtime.start(swe_images, role="test", episode_id="sandbox-tests", limits=Limits(pids_limit=256), workdir=WORKDIR)
    yield box
    box.remove()


@pytest.fixture
def shell(sandbox):
    shell = PersistentShell(sandbox, output_limit=2000, kill_grace=GRACE)
    yield shell
    shell.close()


def processes(sandbox: Sandbox, name: str) -> int:
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


NEVER_ENDING = ["sleep 1000", "yes", "sleep 1000 & sleep 2000"]
IGNORE_SIGTERM = ("python3 -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "print(\"up\", flush=True); time.sleep(1000)'")


def never_ending(command: str):
    """`command` run to its timeout, timed on its own; the counts of `sleep` and `yes` after, and `pwd`'s result."""
    def case(shell, box):
        shell.run("cd /tmp", TIMEOUT)
        started = time.monotonic()
        result = shell.run(command, TIMEOUT)
        elapsed = time.monotonic() - started
        return result, elapsed, processes(box, "sleep"), processes(box, "yes"), shell.run("pwd", TIMEOUT)
    return case


def ignoring_sigterm(shell, box):
    """A process that ignores SIGTERM run to its timeout; the count of `python3` after."""
    return shell.run(IGNORE_SIGTERM, TIMEOUT), processes(box, "python3")


def busy_builtin(shell, box):
    """A busy loop of shell builtins run to its timeout, after state was set; what the shell says after."""
    shell.run("cd /tmp && export KEPT=no", TIMEOUT)
    result = shell.run("while :; do :; done", TIMEOUT)  # never ending: a hang here is pytest-timeout's to report
    return result, shell.run("pwd; echo ${KEPT:-reset}", TIMEOUT).output


def escapes_and_a_fork_bomb(shell, box):
    """Double-forked jobs, then a fork bomb, each run to its timeout; what is left running after each."""
    escaped = shell.run("(setsid sleep 1001 &); (nohup sleep 1002 >/dev/null 2>&1 &); sleep 1000", TIMEOUT)
    sleeps = processes(box, "sleep")
    bomb = shell.run("bomb() { bomb | bomb & }; bomb; sleep 1000", TIMEOUT)
    alive = shell.run("echo alive", TIMEOUT).output
    left = count_processes(box)
    return escaped, sleeps, bomb, alive, left


def count_processes(box, tries: int = 20) -> str:
    """How many processes the box holds. The engine may fail to start the counting process while the bomb's last
    processes are still being reaped (runc: `read init-p: connection reset by peer`): it is asked again, a few times."""
    for _ in range(tries):
        counted = box.run("ls -d /proc/[0-9]* | wc -l", timeout=10).output.text()
        if counted.strip().isdigit():
            return counted
        time.sleep(0.25)
    return counted


#: The timeout cases: by name, what each runs, its sandbox's pids limit and episode id, and its shell's options
#: (the first five as the `sandbox` and `shell` fixtures have them; the fork bomb's as it always had them).
TIMEOUT_CASES = {
    **{command: (never_ending(command), 256, "sandbox-tests", {"output_limit": 2000}) for command in NEVER_ENDING},
    "ignoring sigterm": (ignoring_sigterm, 256, "sandbox-tests", {"output_limit": 2000}),
    "busy builtin": (busy_builtin, 256, "sandbox-tests", {"output_limit": 2000}),
    "escapes and a fork bomb": (escapes_and_a_fork_bomb, 128, "kill-all", {}),
}


@pytest.fixture(scope="module")
def timed_out(runtime, swe_images):
    """Every timeout case run once, all at once, each in its own sandbox and shell (removed when it ends): by name,
    what its test asserts on. Each waits mostly on its timeout and kill grace; each times its own commands."""

    def in_own_sandbox(case, pids_limit, episode_id, shell_options):
        def played():
            box = runtime.start(swe_images, role="test", episode_id=episode_id, limits=Limits(pids_limit=pids_limit),
                                workdir=WORKDIR)
            shell = PersistentShell(box, kill_grace=GRACE, **shell_options)
            try:
                return case(shell, box)
            finally:
                shell.close()
                box.remove()
        return played

    return play_all({name: in_own_sandbox(*case) for name, case in TIMEOUT_CASES.items()}, len(TIMEOUT_CASES))


@pytest.mark.parametrize("command", NEVER_ENDING)
@pytest.mark.slow
def test_a_command_that_never_ends_is_stopped_at_the_timeout(timed_out, command):
    result, elapsed, sleeps, yeses, pwd = timed_out[command].result()
    # not stopped early, timed on its own (how soon after is load-dependent: not asserted)
    assert result.timed_out and elapsed >= TIMEOUT, (elapsed, result)
    assert not result.restarted and result.exit_code == 143, result  # SIGTERM, inside the container
    assert len(result.output) < 2200  # `yes` streamed gigabytes; the head and tail were kept
    assert sleeps == 1 and yeses == 0, (sleeps, yeses)  # only the container's own sleep
    assert pwd.output == "/tmp\n"  # the same shell goes on


@pytest.mark.slow
def test_a_process_ignoring_sigterm_is_killed(timed_out):
    result, pythons = timed_out["ignoring sigterm"].result()
    assert result.timed_out and result.exit_code == 137 and result.output.startswith("up\n"), result
    assert pythons == 0


@pytest.mark.slow
def test_a_busy_shell_builtin_is_stopped_by_replacing_the_shell(timed_out):
    result, after = timed_out["busy builtin"].result()
    assert result.timed_out and result.restarted and result.exit_code is None, result
    assert "a new shell was started" in result.output
    assert after == "/testbed\nreset\n"


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


def test_a_shell_sandbox_runs_and_writes_as_the_sandbox_does(sandbox):
    """Grading's preparation goes through `ShellSandbox`: same results as the engine's exec and archive calls."""
    shell = ShellSandbox(sandbox)
    try:
        data = bytes(range(256)) * 40 + b"\n\x00no newline"
        shell.put_files("/tmp/shell-sandbox", {"sub/blob.bin": data, "plain.txt": b"x"}, mode=0o600)
        assert sandbox.fetch("/tmp/shell-sandbox/sub/blob.bin")[1] == data  # read back by the engine: byte-exact
        assert sandbox.fetch("/tmp/shell-sandbox/plain.txt")[0].mode & 0o777 == 0o600
        dumped = shell.run("cat /tmp/shell-sandbox/sub/blob.bin", timeout=TIMEOUT)
        assert dumped.exit_code == 0 and dumped.output.raw() == data
        # Each command in its own subshell in the working directory, as `Sandbox.run`: nothing carries over.
        assert shell.run("cd /tmp && export KEPT=1 && pwd", timeout=TIMEOUT).output.text() == "/tmp\n"
        kept = shell.run('pwd; echo "[$KEPT]"; exit 7', timeout=TIMEOUT)
        assert (kept.output.text(), kept.exit_code) == (f"{WORKDIR}\n[]\n", 7)
        capped = shell.run("head -c 5000 /dev/zero | tr '\\0' a", timeout=TIMEOUT, output_limit=100)
        assert capped.output.total == 5000 and len(capped.output.raw()) == 100
        late = shell.run("sleep 30", timeout=1)
        assert late.timed_out and shell.run("echo after", timeout=TIMEOUT).output.text() == "after\n"
        assert shell.workdir == sandbox.workdir  # the rest is the sandbox's own
    finally:
        shell.close()


def test_a_shell_sandbox_unpacks_an_archive_as_the_engine_does(sandbox, monkeypatch):
    """Grading copies the agent's files into its container through `ShellSandbox.put_archive`: what the image's tar
    unpacks is what the engine's archive call writes (content, kind, mode, owner, time), with no engine call; an
    archive past the shell's limit goes through the engine."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, mode, data in (("deep/er/script.sh", 0o750, b"#!/bin/sh\necho hi\n"), ("data.bin", 0o640, bytes(range(256)))):
            member = tarfile.TarInfo(name)
            member.mode, member.size, member.mtime, member.uid, member.gid = mode, len(data), 1_600_000_000, 0, 0
            tar.addfile(member, io.BytesIO(data))
        link = tarfile.TarInfo("deep/link")
        link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "er/script.sh", 1_600_000_000
        tar.addfile(link)
    engine_calls: list[str] = []
    real_put_archive = sandbox.put_archive
    monkeypatch.setattr(sandbox, "put_archive", lambda directory, data: (engine_calls.append(directory),
                                                                          real_put_archive(directory, data))[1])
    sandbox.run("mkdir -p /tmp/through-shell /tmp/through-engine /tmp/past-limit", timeout=TIMEOUT)
    shell = ShellSandbox(sandbox)
    try:
        shell.put_archive("/tmp/through-shell", archive.getvalue())
        assert engine_calls == []
        monkeypatch.setattr("gymenvs.container.shell._SHELL_ARCHIVE_LIMIT", 100)
        shell.put_archive("/tmp/past-limit", archive.getvalue())
        assert engine_calls == ["/tmp/past-limit"]
    finally:
        shell.close()
    real_put_archive("/tmp/through-engine", archive.getvalue())
    listing = ("cd {} && (find . -mindepth 1 -type d -printf '%P %y %m %U %G\\n'; "  # a folder's time: when it was made
               "find . ! -type d -printf '%P %y %m %U %G %s %l %T@\\n') | sort && md5sum data.bin deep/er/script.sh")
    written = [sandbox.run(listing.format(where), timeout=TIMEOUT).output.text()
               for where in ("/tmp/through-shell", "/tmp/past-limit", "/tmp/through-engine")]
    assert "deep/link l 777 0 0" in written[0] and "data.bin f 640 0 0 256" in written[0]
    assert written[0] == written[1] == written[2]


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


def test_a_container_killed_from_outside_is_reported(runtime, docker_client, swe_images):
    box = runtime.start(swe_images, role="test", episode_id="kill-test", workdir=WORKDIR)
    shell = PersistentShell(box)
    docker_client.api.kill(box.id)
    with pytest.raises(ContainerGone, match="killed from outside"):
        shell.run("echo hi", TIMEOUT)
    box.remove()
    assert box.id not in [c.id for c in own_containers(docker_client)]


def test_an_engine_error_on_a_container_the_sandbox_stopped_itself_keeps_the_engines_message(runtime, swe_images):
    """Grading stops the agent's container and then reads it: an engine error there is the engine's to explain,
    not "stopped from outside" (the container's state, which `stop` itself set)."""
    box = runtime.start(swe_images, role="test", episode_id="stopped-test", workdir=WORKDIR)
    try:
        box.stop()
        with pytest.raises(SandboxError) as raised:
            box.put_archive("/no/such/directory", b"")
        assert not isinstance(raised.value, ContainerGone) and "/no/such/directory" in str(raised.value)
        assert "from outside" not in str(raised.value) and "stopped by gymenvs" in str(raised.value)
    finally:
        box.remove()


def test_a_container_runc_cannot_freeze_is_stopped_instead(runtime, docker_client, swe_images, monkeypatch):
    """Under heavy load runc may give up freezing a container's cgroup (`unable to freeze`, seen on this machine with
    the engine's tests on two workers). Nothing of it may go on running while it is graded: it is stopped instead.
    (The engine's refusal is injected: runc's failure cannot be caused at will.)"""
    import docker

    box = runtime.start(swe_images, role="test", episode_id="freeze-test", workdir=WORKDIR)
    try:
        box.run("(while :; do date +%N >> /tmp/ticks; sleep 0.01; done) >/dev/null 2>&1 &", timeout=TIMEOUT)

        def refuse(container: str) -> None:
            raise docker.errors.APIError("500 Server Error", explanation=f"Cannot pause container {container}: OCI "
                                         "runtime pause failed: unable to freeze: unknown")

        monkeypatch.setattr(box._api, "pause", refuse)
        box.pause()
        assert docker_client.api.inspect_container(box.id)["State"]["Status"] == "exited"
        ticks = box.read_file("/tmp/ticks", 1 << 20)[0]
        time.sleep(0.3)
        assert ticks and box.read_file("/tmp/ticks", 1 << 20)[0] == ticks  # readable, and no longer written
    finally:
        box.remove()


#: A process that starts a sandbox, prints its id and returns with the sandbox still referenced, never removed.
OWNER = textwrap.dedent("""
    import sys
    from gymenvs.container.runtime.docker import DockerRuntime
    box = DockerRuntime().start(sys.argv[1], role="test", episode_id=sys.argv[2])
    print(box.id, flush=True)
""")


def test_containers_are_removed_at_exit_without_close(docker_client, swe_images):
    result = subprocess.run([sys.executable, "-c", OWNER, swe_images, "atexit"], capture_output=True, text=True,
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


@pytest.mark.slow
def test_a_timeout_kills_double_forked_jobs_and_a_fork_bomb(timed_out):
    escaped, sleeps, bomb, alive, left = timed_out["escapes and a fork bomb"].result()
    assert escaped.timed_out and sleeps == 1, (escaped, sleeps)  # only the container's own sleep is left
    assert bomb.timed_out, bomb
    assert alive.endswith("alive\n")  # after what the bomb printed as it died
    assert int(left) < 12  # init, sleep, the shell and this count's few: the bomb's 128 are gone


def test_a_snapshot_starts_a_sandbox_where_the_first_stood(runtime, docker_client, swe_images):
    first = runtime.start(swe_images, role="test", episode_id="snapshot", workdir=WORKDIR)
    try:
        first.run("echo kept > /testbed/kept.txt", timeout=10)
        image = first.commit("gymenvs/container-test-snapshot", first.id[:12])
    finally:
        first.remove()
    try:
        second = runtime.start(image, role="test", episode_id="snapshot", workdir=WORKDIR)
        try:
            assert second.read_file("/testbed/kept.txt", 100)[0] == b"kept\n"
        finally:
            second.remove()
    finally:
        docker_client.images.remove(image, force=True)


def test_a_container_without_a_network_starts_without_the_engines_network_sandbox(runtime, docker_client, sandbox):
    """No network: the engine's networking disabled (no sandbox or hook of its own at the start), yet localhost
    resolves to the loopback as under the engine's own /etc/hosts, in the container and in one that joins it;
    the file gymenvs wrote is not one of the container's changes."""
    assert docker_client.api.inspect_container(sandbox.id)["Config"]["NetworkDisabled"] is True
    joined = runtime.start(sandbox.image, role="test", episode_id="joined", workdir=WORKDIR, network_of=sandbox)
    try:
        for box in (sandbox, joined):
            listening = box.run("python3 -c 'import socket; s = socket.create_server((\"localhost\", 0)); "
                                "print(s.getsockname()[0], socket.gethostbyname(\"localhost\"))'", timeout=10)
            assert listening.output.text().split() == ["127.0.0.1", "127.0.0.1"], listening.output.text()
    finally:
        joined.remove()
    assert HOSTS_PATH not in sandbox.changed_paths("/")


def test_the_hosts_file_is_written_into_the_layer_without_the_engine(runtime, swe_images, monkeypatch):
    """On this host the file goes straight into the created container's writable layer: no archive call at the
    start, and the file is the one the engine's call would have made (root's, mode 0644, in /etc as the image has it)."""
    engine_writes = []
    monkeypatch.setattr(DockerSandbox, "put_archive", lambda box, *args: engine_writes.append(args))
    box = runtime.start(swe_images, role="test", episode_id="hosts", workdir=WORKDIR)
    try:
        listed = box.run("stat -c '%U %a' /etc/hosts /etc && "
                         "python3 -c 'import socket; print(socket.gethostbyname(\"localhost\"))'", timeout=10).output.text()
    finally:
        box.remove()
    assert engine_writes == []
    assert listed.split() == ["root", "644", "root", "755", "127.0.0.1"], listed


def test_the_changed_paths_are_the_containers_not_what_the_engine_mounts(runtime, swe_images):
    """The engine's init program and a volume's mount point are entries of the writable layer, but not changes."""
    volume = runtime.create_volume(f"gymenvs-test-{uuid.uuid4().hex[:12]}", role="test")
    box = runtime.start(swe_images, role="test", episode_id="changed-paths", workdir=WORKDIR, volumes={volume: "/mnt/host"})
    try:
        box.run("echo new > /tmp/new.txt && rm /etc/debian_version", timeout=10)
        changes = box.changed_paths("/")
    finally:
        box.remove()
        runtime.remove_volume(volume)
    assert changes["/tmp/new.txt"] == "added" and changes["/etc/debian_version"] == "deleted", changes
    assert not {"/mnt/host", "/sbin/docker-init", "/usr/sbin/docker-init"} & set(changes), changes


def test_docker_sandbox_is_a_sandbox_and_docker_runtime_a_runtime(runtime, sandbox):
    assert isinstance(sandbox, Sandbox)  # every method and attribute of the protocol is there
    assert isinstance(runtime, Runtime)
