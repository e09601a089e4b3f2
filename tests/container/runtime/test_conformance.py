"""What every runtime must do the same, run on each one whose engine answers (`TARGETS`: Docker, rootful Podman, and
rootless Podman, which .ci/setup runs as an ordinary user):

- SWE-v0 on a fixture task: the gold patch grades 1, an empty patch 0, a patch forging the test log 0, and the gold
  patch 1 in a container from the warm pool, whose containers go with the env;
- SWEAgent-v0: the reference agent (in the container, its calls carried over its forwarder's exec stream)
  applying the gold patch grades 1, and so does an agent CLI (OpenCode, from its derived image) applying it
  through its own shell tool;
- Terminal-v0 on a Harbor task (its image built on first use, its grading on a snapshot with volumes): the oracle
  scores 1, an empty run 0, and two rows of its tamper table (a pre-written reward, a background process rewriting
  it) 0; on a compose task whose "main" waits for its sidecar's healthcheck (which gymenvs runs itself on Podman),
  the oracle scores 1 and the sidecars go with the episode;
- the engine refusing to create the grading container ends the episode as infra, leaving nothing;
- a container killed from outside, or by the OOM killer, and a file written past the disk limit, end the episode
  as infra;
- an allowlist lets a container reach the allowed address only;
- what a process killed by SIGKILL left (a container, a grading snapshot, a volume) is reaped by the next;
- pausing a container freezes its processes, or, where the engine cannot freeze one, kills them;
- a resource limit is enforced, or, where the runtime declares it cannot (`Runtime.unenforced`: rootless Podman on
  cgroup v1), refused at the first reset, or left out when the env is told to run without it, as its info says.

Where a runtime cannot enforce resource limits, the other rows run without them (`unenforced_limits="run_without"`),
and the row that needs one (the OOM killer's) is an xfail giving the runtime's reason. A runtime whose engine does
not answer is skipped, saying why (in CI a skip fails: .ci/setup starts all three)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from env_support import envs_made
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.images import BASE_IMAGE
from gymenvs.container.runtime import Limits, LimitsNotEnforced, Runtime, SandboxError, shared_runtime
from gymenvs.container.runtime.owners import LABEL, LABEL_PID, LABEL_ROLE

from ..tools_support import SUBMIT, TASKS, bash, ending, write_and_apply
from .runtime_support import rootless_engine
from .test_egress import probe

pytestmark = pytest.mark.docker

#: A fixture task whose tests run in a second or two (textkit: the first of the fixtures).
TASK = FIXTURE_IDS[0]
#: A Harbor fixture task, and what its oracle runs.
HARBOR_TASK = "gymenvs/edit-config"


#: The runtimes the rows run on: the `runtime=` name, and the engine (None: its default; "rootless": .ci/setup's user's).
TARGETS = {"docker": ("docker", None), "podman": ("podman", None), "podman-rootless": ("podman", "rootless")}


@dataclass(frozen=True)
class Target:
    """One runtime the rows run on: how an env chooses it, and the env options it needs."""

    id: str
    name: str
    engine: str | None
    runtime: Runtime

    @property
    def choice(self) -> dict:
        """`runtime=` and `engine=`, and where the runtime cannot enforce resource limits, to run without them."""
        waive = {"unenforced_limits": "run_without"} if self.runtime.unenforced else {}
        return {"runtime": self.name, "engine": self.engine, **waive}

    def limits(self, **fields) -> Limits:
        """`Limits(**fields)`, without the resource limits the runtime cannot enforce."""
        return Limits(**fields, unenforced_limits=self.choice.get("unenforced_limits", "refuse"))


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request):
    """Each runtime, with the base and fixture images present in its own store (built there if missing)."""
    from gymenvs.container.images import build_base_image
    from gymenvs.swe.images import build_fixture_images

    name, engine = TARGETS[request.param]
    engine = rootless_engine() if engine == "rootless" else engine
    try:
        runtime = shared_runtime(name, engine)
    except SandboxError as exc:
        pytest.skip(f"runtime {request.param!r}: {exc}")
    build_base_image(runtime, tag=BASE_IMAGE, progress=False)
    build_fixture_images(runtime, base=BASE_IMAGE, progress=False)
    return Target(request.param, name, engine, runtime)


@pytest.fixture
def make(target):
    with envs_made("gymenvs/SWE-v0", **target.choice, command_timeout_s=20.0) as make:
        yield make


def started(make):
    env = make()
    env.reset(options={"instance_id": TASK})
    return env


def test_the_gold_patch_grades_one(make, target):
    env = started(make)
    assert env.unwrapped.runtime is target.runtime
    applied = env.step(write_and_apply(TASKS[TASK].patch, "gold.patch"))
    assert applied[4]["exit_code"] == 0, applied[0]
    _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")
    assert info["report"]["fail_to_pass"] == dict.fromkeys(TASKS[TASK].fail_to_pass, "PASSED")


def test_an_episode_served_from_the_warm_pool_grades_right_and_close_leaves_nothing(make, target):
    from gymenvs.container.pool import LABEL_POOL
    from gymenvs.container.runtime.owners import LABEL_PID

    pooled = {"label": [f"{LABEL_POOL}=1", f"{LABEL_PID}={os.getpid()}"]}
    env = make(warm_pool=2)
    env.reset(options={"instance_id": TASK})
    served = target.runtime.client.containers.get(env.unwrapped.episode_sandbox.id)
    assert served.labels[LABEL_POOL] == "1"  # taken from the pool, started ahead of the reset
    env.step(write_and_apply(TASKS[TASK].patch, "gold.patch"))
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert (reward, terminated, ending(info)) == (1.0, True, ("model", "solved")), info.get("error")
    env.close()
    assert target.runtime.client.containers.list(all=True, sparse=True, filters=pooled) == []


def test_an_empty_patch_grades_zero(make):
    _, reward, terminated, truncated, info = started(make).step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, True, False) and ending(info) == ("model", "failed")
    assert info["report"]["status"] == "unresolved" and info["report"]["patch_is_empty"]


def test_a_patch_that_forges_the_test_log_grades_zero(target):
    """A tamper attack on SWE grading (tests/swe/test_attacks.py): a module that prints forged PASSED lines at exit."""
    from swe.test_attacks import FORGERY, _module_diff
    from swe.test_attacks import TASK as ATTACKED

    from gymenvs.swe.grading import grade
    from gymenvs.swe.images import image_for

    attack = _module_diff("textkit/slug.py", ATTACKED, FORGERY)
    report = grade(target.runtime, ATTACKED, attack, image=image_for(ATTACKED), timeout=120, screen="flag",
                   limits=target.limits())
    assert report.reward == 0.0 and report.status == "unresolved"
    assert "the log claims 2 test(s) passed that the test runner saw fail" in report.error


def test_localhost_resolves_in_a_container_without_a_network_and_its_start_writes_no_archive(target, monkeypatch):
    """Docker's /etc/hosts goes into the layer before the start (its networking disabled); Podman mounts its own
    whatever the network: on neither does the start call the engine's archive API."""
    from gymenvs.container.runtime.docker.sandbox import DockerSandbox

    archives = []
    monkeypatch.setattr(DockerSandbox, "put_archive", lambda box, *args: archives.append(args))
    sandbox = target.runtime.start(BASE_IMAGE, role="test", episode_id="hosts", limits=target.limits(network=False))
    try:
        resolved = sandbox.run("python3 -c 'import socket; print(socket.gethostbyname(\"localhost\"))'", timeout=10)
    finally:
        sandbox.remove()
    assert (resolved.output.text().strip(), archives) == ("127.0.0.1", []), resolved.output.text()


#: Two rows of Terminal-v0's tamper table (tests/terminal/test_tamper.py) on each runtime.
TAMPER_ROWS = ["pre-written reward.txt", "background process rewriting the reward"]


@pytest.mark.parametrize("name", TAMPER_ROWS)
def test_a_harbor_tamper_row_scores_zero(target, tmp_path, name):
    from terminal.test_tamper import ATTACKS, BASE, make_task

    from gymenvs.terminal.grading import grade_task

    agent, test_sh = ATTACKS[name]
    task = make_task(tmp_path, name, test_sh)
    sandbox = target.runtime.start(BASE, role="verifier-attack", episode_id=task.name, workdir="/app",
                                   limits=target.limits(mem_limit="512m", network=False, disk_limit=None))
    try:
        assert sandbox.run(agent, timeout=30).exit_code == 0
        result = grade_task(sandbox, task)
    finally:
        sandbox.remove()
    assert result.reward == 0.0, result


def test_a_volume_reached_on_this_host_holds_root_s_files_in_a_sandbox_where_the_runtime_gives_one(target):
    """Harbor grading writes the tests into, and reads the reward from, a volume's directory on this host where the
    runtime gives one: only where a file written there is root's in the sandbox (rootless Podman's volumes belong to
    its user, whose root in the sandbox this process is not: none)."""
    runtime = target.runtime
    volume = runtime.create_volume(f"gymenvs-test-{os.getpid()}-{target.id}", role="verifier")
    try:
        directory = runtime.volume_directory(volume)
        assert (directory is None) == (target.id == "podman-rootless"), directory
        if directory is None:
            return
        Path(directory, "test.sh").write_text("echo hi\n")
        sandbox = runtime.start(BASE_IMAGE, role="volume-test", episode_id="volume", volumes={volume: "/tests"},
                                limits=target.limits(network=False, disk_limit=None))
        try:
            seen = sandbox.run("stat -c '%u:%g' /tests/test.sh && bash /tests/test.sh > /tests/out", timeout=10)
            assert seen.output.text().split() == ["0:0"]
        finally:
            sandbox.remove()
        assert Path(directory, "out").read_text() == "hi\n"
    finally:
        runtime.remove_volume(volume)


@pytest.mark.parametrize("listening", [True, False], ids=["listening", "quiet"])
def test_whether_a_sandbox_listens_on_tcp_is_read_from_outside_or_not_at_all(target, listening):
    """Read on this host from its init's /proc (Harbor grading then runs nothing in the agent's container when nothing
    listens); None where the runtime cannot (rootless Podman without its own cgroup), never a wrong answer."""
    sandbox = target.runtime.start(BASE_IMAGE, role="listen-test", episode_id="listen",
                                   limits=target.limits(network=False, disk_limit=None))
    try:
        if listening:
            serve = "(setsid nohup python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &)"
            wait = "for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done"
            assert sandbox.run(f"{serve} && {wait}", timeout=30).exit_code == 0
        answer = sandbox.listens_on_tcp()
        assert answer is listening or (answer is None and target.id == "podman-rootless"), answer
    finally:
        sandbox.remove()


def test_a_program_in_the_sandbox_reaches_a_listener_of_this_process_on_its_own_loopback(target):
    """Where the runtime can make it (the agent envs' channel listens there, with nothing relaying in the container):
    a socket of this process in the sandbox's network namespace, on its loopback and not this host's, answering a
    program of the sandbox, and not one of the sandbox's own listening services (`listens_on_tcp`). None where the
    runtime cannot (rootless Podman without its own cgroup)."""
    sandbox = target.runtime.start(BASE_IMAGE, role="listen-test", episode_id="listen",
                                   limits=target.limits(network=False, disk_limit=None))
    try:
        namespace = os.readlink("/proc/thread-self/ns/net")
        listener = sandbox.loopback_listener()
        assert os.readlink("/proc/thread-self/ns/net") == os.readlink("/proc/self/ns/net") == namespace  # no thread moved
        if listener is None:
            assert target.id == "podman-rootless"
            return
        with listener:
            port = listener.getsockname()[1]
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            assert sandbox.listens_on_tcp() is False
            answered = threading.Thread(target=answer_once, args=(listener,), daemon=True)
            answered.start()
            call = (f"import socket; s = socket.create_connection(('127.0.0.1', {port})); s.sendall(b'ping'); "
                    "print(s.recv(64).decode())")
            result = sandbox.run(f"python3 -c {shlex.quote(call)}", timeout=30)
            answered.join(10)
        assert result.output.text() == "pong: ping\n", result.output.text()
    finally:
        sandbox.remove()


def answer_once(listener: socket.socket) -> None:
    connection, _ = listener.accept()
    with connection:
        connection.sendall(b"pong: " + connection.recv(64))


def test_an_engine_error_at_grading_ends_the_episode_as_infra(target):
    """The engine refuses to create the grading container (an error of its own shape, injected by a proxy in front of
    its socket): the episode ends as infra, ungraded, and nothing is left."""
    from gymenvs.container.runtime import runtime_class
    from gymenvs.container.runtime.docker.chaos import EngineProxy

    socket_path = target.runtime.info()["engine"].removeprefix("unix://")
    with EngineProxy(upstream=socket_path) as proxy:
        runtime = runtime_class(target.name)(engine=proxy.url, timeout=60)
        try:
            with envs_made("gymenvs/SWE-v0", runtime=runtime, **{k: v for k, v in target.choice.items()
                                                                 if k not in ("runtime", "engine")}) as make:
                env = make()
                env.reset(options={"instance_id": TASK})
                # Refused twice: ahead (the first step starts the grading container), then again at submit.
                rule = proxy.fail("POST", "/containers/create", times=2, message="injected: no space left on device")
                env.step(write_and_apply(TASKS[TASK].patch, "gold.patch"))
                _, reward, terminated, truncated, info = env.step(SUBMIT)
        finally:
            runtime.close()
    assert len(rule.hits) == 2 and (reward, terminated, truncated) == (0.0, False, True)
    assert ending(info) == ("infra", "engine_error") and "injected: no space left on device" in info["outcome_detail"]
    ours = target.runtime.client.containers.list(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"})
    assert ours == [], [container.labels for container in ours]


def test_the_reference_agent_applying_the_gold_patch_grades_one(target):
    from ..agent.agent_support import apply_patch

    with envs_made("gymenvs/SWEAgent-v0", **target.choice, call_timeout_s=60.0) as make_agent:
        env = make_agent()
        env.reset(options={"instance_id": TASK})
        env.step(apply_patch(TASKS[TASK].patch))
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")


#: The agent CLI the row below runs: the cheapest to install (7 s into one Podman image, against 37 s for Pi, by hand).
AGENT_CLI = "opencode"


def test_an_agent_cli_applying_the_gold_patch_through_its_own_shell_grades_one(target):
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec
    from gymenvs.swe.images import image_for

    from ..agent.cli_support import CLIS, gold_patch_call

    cli = CLIS[AGENT_CLI]
    # .ci/setup --agents installs it in each store: here only where it is missing (npm's tree cached on this host)
    install_agent(target.runtime, agent_spec(AGENT_CLI), [image_for(TASKS[TASK])], progress=False)
    with envs_made("gymenvs/SWEAgent-v0", **target.choice, agent=AGENT_CLI, call_timeout_s=120.0,
                   max_turns=10) as make_agent:
        env = make_agent()
        observation, info = env.reset(options={"instance_id": TASK})
        assert info["request"]["wire"] == cli.wire and cli.system_prompt in observation
        observation, *_ = env.step(cli.shell("echo marker-$((6 * 7))"))
        assert "marker-42" in observation, observation
        env.step(gold_patch_call(cli, TASK))
        _, reward, terminated, truncated, info = env.step("The issue is fixed.")
    assert (reward, terminated, truncated) == (1.0, True, False), (info.get("error"), info.get("agent_log", "")[-2000:])
    assert info["report"]["status"] == "resolved" and {record["wire"] for record in info["trajectory"]} == {cli.wire}


@pytest.mark.parametrize("oracle", [True, False], ids=["oracle", "empty"])
def test_a_harbor_task_scores_one_after_its_oracle_and_zero_after_nothing(target, oracle):
    from gymenvs.terminal.tasks import load_terminal_tasks

    (task,) = [task for task in load_terminal_tasks() if task.name == HARBOR_TASK]
    with envs_made("gymenvs/Terminal-v0", **target.choice, command_timeout_s=30.0) as make_terminal:
        env = make_terminal()
        env.reset(options={"instance_id": HARBOR_TASK})
        if oracle:
            assert env.step(bash(task.solve_script.read_text()))[4]["exit_code"] == 0
            # The verifier starts during the episode only where grading can copy the agent's changes into it (Docker,
            # from the agent's overlay layer); on Podman grading tests a snapshot, and starts no verifier ahead.
            while any(thread.name == "gymenvs-grading-ahead" for thread in threading.enumerate()):
                time.sleep(0.05)
            verifiers = {"label": [f"{LABEL_ROLE}=verifier", f"{LABEL_PID}={os.getpid()}"]}
            started = target.runtime.client.containers.list(all=True, sparse=True, filters=verifiers)
            assert len(started) == (1 if target.name == "docker" else 0)
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    expected = (1.0, ("model", "solved")) if oracle else (0.0, ("model", "failed"))
    assert (reward, ending(info)) == expected and terminated and not truncated, info.get("outcome_detail")


def test_validating_a_harbor_task_starts_one_verifier_per_graded_run(target):
    """`gymenvs tasks validate` starts the verifier ahead, as an episode does, only where grading takes it (Docker);
    on Podman grading tests a snapshot in a verifier of its own. Where the runtime cannot enforce the task's limits
    (rootless Podman here), validation says so and starts none."""
    from gymenvs.terminal.family import HarborFamily
    from gymenvs.terminal.tasks import load_terminal_tasks

    (task,) = [task for task in load_terminal_tasks() if task.name == HARBOR_TASK]
    started = time.time_ns()
    validation = HarborFamily().validate(task, target.runtime, runs=1)
    created = target.runtime.client.events(since=started // 10**9 - 1, until=int(time.time()) + 1, decode=True, filters={
        "type": "container", "event": "create", "label": f"{LABEL_PID}={os.getpid()}"})
    verifiers = [event for event in created
                 if event["timeNano"] >= started and event["Actor"]["Attributes"].get(LABEL_ROLE) == "verifier"]
    if target.runtime.unenforced:
        assert validation.status == "error" and "cannot enforce" in (validation.error or ""), validation
        assert verifiers == []
    else:
        assert validation.status == "valid", validation
        assert len(verifiers) == 2  # the empty run's and the oracle's


#: A Harbor fixture whose "main" waits for its compose sidecar's healthcheck (`condition: service_healthy`).
COMPOSE_TASK = "gymenvs/record-in-sidecar"


def test_a_compose_task_waits_for_its_healthy_sidecar_and_its_oracle_scores_one_there(target):
    from gymenvs.terminal.tasks import load_terminal_tasks

    (task,) = [task for task in load_terminal_tasks() if task.name == COMPOSE_TASK]
    with envs_made("gymenvs/Terminal-v0", **target.choice, command_timeout_s=60.0) as make_terminal:
        env = make_terminal()
        env.reset(options={"instance_id": COMPOSE_TASK})
        network = env.unwrapped.limits.network_name
        sidecars = target.runtime.client.containers.list(filters={"network": network})
        box = env.unwrapped.episode_sandbox
        (ledger,) = [c for c in sidecars if c.id != box.id]
        assert ledger.attrs["State"]["Health"]["Status"] == "healthy"
        # On Podman its name is in the agent's /etc/hosts: Podman's DNS server drops lookups while it reloads
        address = ledger.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
        from_files = box.run("getent -s files hosts ledger", timeout=20).output.text().split()[:1]
        assert (from_files == [address]) == (target.name == "podman"), from_files
        observation = env.step(bash(task.solve_script.read_text()))[0]
        assert "recorded" in observation, observation
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated, ending(info)) == (1.0, True, False, ("model", "solved")), info["report"]
    assert "ledger entry 'order': 'A-20931'" in info["report"]["log_tail"]
    assert not target.runtime.client.networks.list(names=[network])  # the sidecars' project went with the episode
    assert not target.runtime.client.containers.list(all=True, filters={"id": [c.id for c in sidecars]})


def containers(runtime: Runtime) -> set[str]:
    """This process's containers on `runtime` (other test processes may share the engine)."""
    ours = {"label": [LABEL, f"{LABEL_PID}={os.getpid()}"]}
    return {container.id for container in runtime.client.containers.list(all=True, sparse=True, filters=ours)}


def test_a_resource_limit_is_enforced_or_else_refused_at_the_first_reset_or_left_out_when_told(target):
    with envs_made("gymenvs/SWE-v0", runtime=target.name, engine=target.engine) as make_default:
        env = make_default()
        if target.runtime.unenforced:
            before = containers(target.runtime)
            with pytest.raises(LimitsNotEnforced, match="mem_limit='2g'.*unenforced_limits='run_without'"):
                env.reset(options={"instance_id": TASK})
            assert containers(target.runtime) == before  # refused before any started
            env = make_default(unenforced_limits="run_without")
        _, info = env.reset(options={"instance_id": TASK})
        sandbox = env.unwrapped.episode_sandbox
        memory = target.runtime.client.api.inspect_container(sandbox.id)["HostConfig"]["Memory"]
        assert info["runtime"]["unenforced"] == target.runtime.unenforced
        if "mem_limit" in target.runtime.unenforced:
            assert sandbox.limits.mem_limit is None and memory == 0
        else:
            assert sandbox.limits.mem_limit == "2g" and memory == 2 << 30


def test_pausing_a_container_freezes_its_processes_or_where_the_engine_cannot_kills_them(target):
    sandbox = target.runtime.start(BASE_IMAGE, role="test", episode_id="pause", limits=target.limits())
    try:
        sandbox.pause()
        status = target.runtime.client.api.inspect_container(sandbox.id)["State"]["Status"]
        assert status == ("paused" if target.runtime.can_freeze else "exited"), status
        assert sandbox.read_file("/etc/debian_version", 100)[0]  # its files stay readable for grading
    finally:
        sandbox.remove()


def test_a_container_killed_from_outside_ends_the_episode_as_infra(make):
    env = started(make)
    runtime = env.unwrapped.runtime
    runtime.client.api.kill(env.unwrapped.episode_sandbox.id)  # from outside, by the engine's own API
    _, reward, terminated, truncated, info = env.step(bash("echo still here"))
    assert (reward, terminated, truncated) == (0.0, False, True), info
    assert ending(info) == ("infra", "container_died"), info.get("outcome_detail")


#: How each runtime's episode ends when the OOM killer stops its container: Podman 4.3 (cgroup v1, runc, conmon 2.1.6,
#: measured on the CI machines) does not report the container as OOM-killed (conmon writes its `oom` marker into its
#: working directory, the API service's, not the container's bundle directory where libpod looks: docs/runtimes.md),
#: so the episode ends as a container that died.
OOM_REASONS = {"docker": "oom_killed", "podman": "container_died"}


def test_a_container_the_oom_killer_stops_mid_command_ends_the_episode_as_infra(make, target):
    from ..test_faults import FILL_MEMORY, MAIN_PROCESS_FIRST

    if "mem_limit" in target.runtime.unenforced:
        pytest.xfail(f"runtime {target.id!r} cannot enforce a memory limit: {target.runtime.unenforced['mem_limit']}")
    env = make(mem_limit="56m")  # under what /dev/shm holds (63-64 MiB)
    env.reset(options={"instance_id": TASK})
    _, reward, terminated, truncated, info = env.step(bash(f"{MAIN_PROCESS_FIRST}; {FILL_MEMORY}"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert ending(info) == ("infra", OOM_REASONS[target.name]) and "exit code 137" in info["outcome_detail"], info


def test_a_file_written_past_the_disk_limit_ends_the_episode_as_infra_ungraded(make):
    env = make(disk_limit="40m")
    env.reset(options={"instance_id": TASK})
    env.step(bash("head -c 60m /dev/zero > /tmp/fill"))
    _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and ending(info) == ("infra", "disk_limit")
    assert info["report"]["status"] == "error"


def test_an_allowlist_lets_a_container_reach_the_allowed_address_only(target):
    runtime = target.runtime
    servers = [runtime.start(BASE_IMAGE, role="test", episode_id="egress", limits=target.limits(network=True))
               for _ in range(2)]
    try:
        for server in servers:
            server.open_exec(["python3", "-m", "http.server", "8000"])
        allowed, other = (runtime.client.api.inspect_container(s.id)["NetworkSettings"]["IPAddress"] for s in servers)
        sandbox = runtime.start(BASE_IMAGE, role="test", episode_id="egress",
                                limits=target.limits(network=True, allowed_hosts=(allowed,)))
        try:
            output = probe(sandbox, allowed, other)
            assert f"{allowed} reached" in output and f"{other} refused" in output, output
        finally:
            sandbox.remove()
    finally:
        for server in servers:
            server.remove()


#: A process that leaves a container, a grading snapshot and a volume on runtime argv[1], prints their names, and waits
#: to be killed (as tests/container/test_reaper.py's owner does on Docker).
OWNER = textwrap.dedent("""
    import json, sys, time, uuid
    from gymenvs.container.runtime import Limits, shared_runtime

    runtime, nonce = shared_runtime(sys.argv[1], sys.argv[3] or None), uuid.uuid4().hex[:12]
    sandbox = runtime.start(sys.argv[2], role="agent", episode_id="reaper-test", limits=Limits(unenforced_limits=sys.argv[4]))
    sandbox.commit("gymenvs-terminal-snapshot", nonce)
    volume = runtime.create_volume(f"gymenvs-terminal-{nonce}-logs", role="verifier")
    print(json.dumps([sandbox.name, f"gymenvs-terminal-snapshot:{nonce}", volume]), flush=True)
    time.sleep(600)
""")


def test_what_a_killed_process_left_is_reaped_by_the_next(target):
    """Another test process's first reset may reap some of the leftovers first (the engine's tests run on two workers):
    then the reaping here named less, and it is tried again with a new owner."""
    from gymenvs.container.reaper import reap

    root = str(Path(__file__).resolve().parents[3])
    runtime = target.runtime
    for _ in range(3):
        owner = subprocess.Popen([sys.executable, "-c", OWNER, target.name, BASE_IMAGE, target.engine or "",
                                  target.limits().unenforced_limits],
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": root})
        container, snapshot, volume = json.loads(owner.stdout.readline())
        assert runtime.image_exists(snapshot)
        owner.send_signal(signal.SIGKILL)  # no atexit, no finalizer
        owner.wait(30)
        reaped = reap(runtime)
        assert not runtime.image_exists(snapshot)
        for collection, name in ((runtime.client.containers, container), (runtime.client.volumes, volume)):
            with pytest.raises(docker.errors.NotFound):
                collection.get(name)
        # Podman reports the snapshot by its qualified name, docker.io/library/<name>
        if {container, volume} <= set(reaped) and any(name.endswith(snapshot) for name in reaped):
            return
    pytest.fail(f"the reaper removed {[container, snapshot, volume]} but named only {reaped}, three times")
