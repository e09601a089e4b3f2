"""Compose tasks (`gymenvs.terminal.compose`): the agent's container is the service "main", the others run beside
it on the project's private network, grading talks to them as the agent left them, and every container goes
with the episode, or with the next process's reaper after a SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import docker
import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.terminal.tasks import fixtures_path

ROOT = Path(__file__).resolve().parents[2]
TASK = "gymenvs/record-in-sidecar"
FIXTURE = fixtures_path() / "record-in-sidecar"
needs_compose = pytest.mark.skipif(shutil.which("docker-compose") is None and shutil.which("docker") is None,
                                   reason="no compose tool here (Debian: apt-get install docker-compose)")


def compose_task(tmp_path: Path, compose: str, *, dockerfile: bool = True, toml: str = "") -> Path:
    """A copy of the fixture with its own compose file (and task.toml additions)."""
    folder = tmp_path / "task"
    shutil.copytree(FIXTURE, folder)
    (folder / "environment" / "docker-compose.yaml").write_text(textwrap.dedent(compose))
    if not dockerfile:
        (folder / "environment" / "Dockerfile").unlink()
    (folder / "task.toml").write_text(f'[task]\nname = "compose"\n{toml}')
    return folder


def refusal(folder: Path) -> str | None:
    from gymenvs.terminal.compose import unsupported
    from gymenvs.terminal.task import TerminalTask

    return unsupported(TerminalTask.from_dir(folder))


# -- what is read, without an engine ----------------------------------------------------------------------


@needs_compose
def test_the_fixture_is_run_and_mains_environment_and_dependencies_are_read():
    from gymenvs.terminal.compose import main_environment, read_project
    from gymenvs.terminal.task import TerminalTask

    task = TerminalTask.from_dir(FIXTURE)
    assert refusal(FIXTURE) is None
    assert list(read_project(task).sidecars) == ["ledger"]
    assert read_project(task).wait_for == {"ledger": "service_healthy"}
    assert main_environment(task) == {"LEDGER_URL": "http://ledger:8000"}


@needs_compose
@pytest.mark.parametrize(("compose", "dockerfile", "why"), [
    ("services:\n  main:\n    depends_on: [db]\n  db:\n    image: db\n", False,
     "'main' has nothing to run: a compose task needs environment/Dockerfile or \\[environment\\] docker_image"),
    ("services:\n  main:\n    command: python3 -m http.server\n", True, "sets its own command .*keep-alive"),
    ("services:\n  main:\n    ports: ['8080:80']\n    volumes: ['./data:/data']\n", True,
     r"sets \['ports', 'volumes'\]; gymenvs starts the agent's container itself"),
    ("services:\n  main:\n    image: other\n", True, "names its own image or build"),
    ("services:\n  db:\n    image: db\n    networks: [back]\nnetworks:\n  back: {}\n", True,
     r"the services \['db'\] set their own networks"),
    ("services:\n  main:\n    environment: [A=1\n", True, "not a valid project"),
    ("services:\n  main:\n    depends_on: [db]\n  db:\n    image: db\n    volumes: ['./data:/data', 'kept:/kept']\n"
     "volumes:\n  kept: {}\n", True, r"the services \['db'\] bind-mount host paths"),
], ids=["no_main_image", "main_command", "main_ports_volumes", "main_image", "own_network", "bad_yaml", "sidecar_bind"])
def test_what_gymenvs_cannot_run_as_harbor_would_is_refused_with_the_reason(tmp_path, compose, dockerfile, why):
    import re

    reason = refusal(compose_task(tmp_path, compose, dockerfile=dockerfile))
    assert reason is not None and re.search(why, reason), reason


@needs_compose
def test_a_refused_compose_task_is_never_drawn_and_reset_says_why(tmp_path):
    shutil.copytree(fixtures_path() / "edit-config", tmp_path / "edit-config")
    compose_task(tmp_path, "services:\n  main:\n    command: sleep 5\n")
    env = gym.make("gymenvs/Terminal-v0", dataset=str(tmp_path))
    try:
        assert [task.name for task in env.unwrapped.tasks] == ["gymenvs/edit-config"]
        with pytest.raises(ValueError, match="'compose' is never drawn: .*sets its own command"):
            env.reset(options={"instance_id": "compose"})
    finally:
        env.close()


@needs_compose
def test_the_container_environment_is_mains_with_the_tasks_env_over_it_written_into_the_image(tmp_path):
    """As Harbor sets both on the agent's container: [environment] env wins; values reach the image unaltered."""
    import io
    import tarfile

    from gymenvs.terminal.images import container_environment, environment_context, image_name
    from gymenvs.terminal.task import TerminalTask

    odd = 'a "quoted" $HOME \\ value'
    folder = compose_task(tmp_path, "services:\n  main:\n    environment:\n      A: from-compose\n      B: kept\n",
                          toml=f'[environment]\nenv = {{ A = "from-task", ODD = {json.dumps(odd)} }}\n')
    task = TerminalTask.from_dir(folder)
    assert container_environment(task) == {"A": "from-task", "B": "kept", "ODD": odd}
    with tarfile.open(fileobj=io.BytesIO(environment_context(task))) as tar:
        dockerfile = tar.extractfile("Dockerfile").read().decode()
    assert dockerfile.startswith((FIXTURE / "environment" / "Dockerfile").read_text())
    assert 'ENV A="from-task"\n' in dockerfile and 'ENV ODD="a \\"quoted\\" \\$HOME \\\\ value"\n' in dockerfile
    before = image_name(task)
    (folder / "task.toml").write_text('[task]\nname = "compose"\n[environment]\nenv = { A = "changed" }\n')
    assert image_name(TerminalTask.from_dir(folder)) != before  # a new environment is a new image


# -- episodes, on the engine ------------------------------------------------------------------------------


def owned_by(pid: int) -> str:
    """The label filter for what the process `pid` made (other test processes may share the engine)."""
    return f"gymenvs.container.owner.pid={pid}"


def sidecar_containers(client: docker.DockerClient, pid: int | None = None) -> list:
    """The sidecars that the process `pid` (this one by default) made."""
    owner = owned_by(pid or os.getpid())
    return client.containers.list(all=True, filters={"label": ["gymenvs.container.role=sidecar", owner]})


def our_networks(client: docker.DockerClient, pid: int | None = None) -> list:
    return client.networks.list(filters={"label": ["gymenvs.container", owned_by(pid or os.getpid())]})


def bash(command: str) -> str:
    return json.dumps({"name": "bash", "arguments": {"command": command}})


@pytest.fixture
def terminal_env(terminal_images):
    env = gym.make("gymenvs/Terminal-v0", instance_ids=[TASK], command_timeout_s=60.0)
    yield env
    env.close()


def test_the_oracle_records_in_the_live_sidecar_and_grading_reads_it_there(terminal_env, docker_client):
    terminal_env.reset(seed=0)
    env = terminal_env.unwrapped
    [ledger] = sidecar_containers(docker_client)
    network = docker_client.networks.get(env.limits.network_name)
    assert network.attrs["Internal"]  # the task allows no internet: the project's network reaches nothing outside
    agent = docker_client.containers.get(env.episode_sandbox.id)
    assert network.name in agent.attrs["NetworkSettings"]["Networks"]
    assert "main" in agent.attrs["NetworkSettings"]["Networks"][network.name]["Aliases"]
    observation, *_ = terminal_env.step(bash("echo $LEDGER_URL; getent hosts ledger >/dev/null && echo resolved"))
    assert "http://ledger:8000\nresolved" in observation
    observation, *_ = terminal_env.step(bash((FIXTURE / "solution" / "solve.sh").read_text()))
    assert "recorded" in observation
    _, reward, terminated, _, info = terminal_env.step(json.dumps({"name": "submit", "arguments": {}}))
    assert (reward, terminated) == (1.0, True), info["report"]
    assert "ledger entry 'order': 'A-20931'" in info["report"]["log_tail"]
    assert not sidecar_containers(docker_client) and not our_networks(docker_client)  # gone with the episode
    with pytest.raises(docker.errors.NotFound):
        ledger.reload()


def test_an_empty_run_scores_zero_and_each_episode_gets_fresh_sidecars(terminal_env, docker_client):
    names = []
    for _ in range(2):
        terminal_env.reset(seed=0)
        names += [c.name for c in sidecar_containers(docker_client)]
        _, reward, *_, info = terminal_env.step(json.dumps({"name": "submit", "arguments": {}}))
        assert reward == 0.0 and "could not read the ledger" in info["report"]["log_tail"]  # 404: nothing recorded
    assert len(set(names)) == 2 and not sidecar_containers(docker_client)


def test_a_sidecar_that_dies_before_it_is_healthy_fails_the_reset_saying_so_and_leaves_nothing(tmp_path, terminal_images,
                                                                                              docker_client):
    from gymenvs.container.runtime import SandboxError

    folder = compose_task(tmp_path, """\
        services:
          main:
            depends_on: {ledger: {condition: service_healthy}}
          ledger:
            build: ./ledger
            command: ["python3", "-c", "raise SystemExit(3)"]
            healthcheck: {test: ["CMD", "true"], interval: 1s}
        """)
    env = gym.make("gymenvs/Terminal-v0", dataset=str(folder))
    try:
        with pytest.raises(SandboxError, match="sidecar 'ledger' exited 3 before it was healthy"):
            env.reset(seed=0)
    finally:
        env.close()
    assert not sidecar_containers(docker_client) and not our_networks(docker_client)


#: A process that starts an episode of the compose fixture, prints what runs for it, then waits to be killed.
OWNER = textwrap.dedent(f"""
    import json, time
    import gymnasium as gym, gymenvs
    env = gym.make("gymenvs/Terminal-v0", instance_ids=[{TASK!r}])
    env.reset(seed=0)
    print(json.dumps({{"network": env.unwrapped.limits.network_name,
                       "sidecars": env.unwrapped._sidecars.names}}), flush=True)
    time.sleep(600)
""")


def test_what_a_killed_process_left_of_a_compose_episode_is_reaped(runtime, docker_client, terminal_images):
    from gymenvs.container.reaper import reap

    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        made = json.loads(owner.stdout.readline())
        assert [c.name for c in sidecar_containers(docker_client, owner.pid)] == made["sidecars"]
        assert [n.name for n in our_networks(docker_client, owner.pid)] == [made["network"]]
    finally:
        owner.send_signal(signal.SIGKILL)  # no atexit, no finalizer
        owner.wait(30)
    # Another test process's first reset may reap them first (the engine's tests run on two workers): what counts is
    # that once this process has reaped, nothing of the killed owner is left.
    reap(runtime)
    assert not sidecar_containers(docker_client, owner.pid) and not our_networks(docker_client, owner.pid)


def test_a_named_volume_of_the_project_is_labelled_as_this_processs_and_goes_with_the_episode(tmp_path, terminal_images,
                                                                                           docker_client):
    """Labelled, a volume a killed process left is the reaper's to remove, as its containers and network are."""
    folder = compose_task(tmp_path, """\
        services:
          main:
            depends_on: {ledger: {condition: service_healthy}}
            environment: {LEDGER_URL: "http://ledger:8000"}
          ledger:
            build: ./ledger
            volumes: ["entries:/var/ledger"]
            healthcheck:
              test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')"]
              interval: 1s
        volumes:
          entries: {}
        """)
    env = gym.make("gymenvs/Terminal-v0", dataset=str(folder))
    try:
        env.reset(seed=0)
        [volume] = docker_client.volumes.list(filters={"label": ["gymenvs.container.role=sidecar", owned_by(os.getpid())]})
        assert volume.name.endswith("_entries") and volume.attrs["Labels"]["gymenvs.container.owner.pid"] == str(os.getpid())
        env.step(json.dumps({"name": "submit", "arguments": {}}))
    finally:
        env.close()
    assert not docker_client.volumes.list(filters={"label": ["gymenvs.container.role=sidecar", owned_by(os.getpid())]})
