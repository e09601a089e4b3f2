"""Choosing a runtime by name (`runtime="docker" | "podman"`, `engine=URL`): every container env and the commands
check the choice at construction, and refuse a runtime that lacks what a task needs, touching no engine."""

from __future__ import annotations

import shutil

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.cli import main
from gymenvs.container.runtime import check_choice, runtime_class
from gymenvs.container.runtime.docker import DockerRuntime
from gymenvs.container.runtime.podman import PodmanRuntime
from gymenvs.terminal.tasks import fixtures_path

ENV_IDS = ["gymenvs/SWE-v0", "gymenvs/SWEAgent-v0", "gymenvs/Terminal-v0", "gymenvs/TerminalAgent-v0"]
#: The Harbor fixture whose "main" waits for its sidecar's healthcheck.
HEALTHY_SIDECAR = "gymenvs/record-in-sidecar"
needs_compose = pytest.mark.skipif(shutil.which("docker-compose") is None and shutil.which("docker") is None,
                                   reason="no compose tool here (Debian: apt-get install docker-compose)")


def test_each_name_is_its_runtime_class_found_without_an_engine():
    assert runtime_class("docker") is DockerRuntime and runtime_class("podman") is PodmanRuntime
    assert PodmanRuntime.name == "podman" and not PodmanRuntime.lacks and not DockerRuntime.lacks


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("runtime", ["docker", "podman"])
def test_every_container_env_takes_a_runtime_name_and_an_engine_url_touching_no_engine(env_id, runtime):
    env = gym.make(env_id, runtime=runtime, engine="tcp://192.0.2.1:2375", instance_ids=None)
    assert env.unwrapped._runtime == runtime and env.unwrapped._engine == "tcp://192.0.2.1:2375"
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize(("option", "value", "allowed"), [
    ("runtime", "rkt", "allowed are 'docker', 'podman'"),
    ("runtime", 3, "allowed are 'docker', 'podman' or a Runtime object"),
    ("engine", "/var/run/docker.sock", "a scheme among unix, tcp, http, https, ssh"),
    ("engine", "ftp://host", "a scheme among unix, tcp, http, https, ssh"),
])
def test_a_bad_runtime_or_engine_is_a_value_error_at_construction_naming_it_and_what_is_allowed(env_id, option, value,
                                                                                               allowed):
    with pytest.raises(ValueError) as raised:
        gym.make(env_id, **{option: value})
    assert f"{option}={value!r}" in str(raised.value) and allowed in str(raised.value)


def test_an_engine_beside_a_runtime_object_is_refused():
    runtime = object.__new__(DockerRuntime)  # never connected: the check comes first
    with pytest.raises(ValueError, match="beside a Runtime object, which has its own engine"):
        gym.make("gymenvs/SWE-v0", runtime=runtime, engine="unix:///run/podman/podman.sock")


@needs_compose
def test_on_podman_a_task_waiting_on_a_healthy_sidecar_is_accepted_at_construction():
    env = gym.make("gymenvs/Terminal-v0", runtime="podman", dataset=str(fixtures_path()),
                   instance_ids=[HEALTHY_SIDECAR])
    assert not env.unwrapped.refused and [task.instance_id for task in env.unwrapped.tasks] == [HEALTHY_SIDECAR]
    env.close()


def test_the_check_names_the_url_allowed():
    check_choice("podman", "ssh://user@host")
    check_choice("docker", "unix:///var/run/docker.sock")
    with pytest.raises(ValueError, match="engine='unix://'"):
        check_choice("docker", "unix://")


@pytest.mark.parametrize("command", [["swe", "build-images"], ["swe", "grade"], ["swe", "reap"], ["swe", "install-agent", "pi"],
                                     ["tasks", "validate"], ["tasks", "build-images"], ["tasks", "regrade", "x"]])
def test_the_commands_that_reach_an_engine_refuse_a_bad_runtime_or_engine_before_reaching_one(command, capsys):
    for bad, said in ((["--runtime", "rkt"], "invalid choice: 'rkt'"), (["--engine", "docker.sock"], "--engine 'docker.sock'")):
        with pytest.raises(SystemExit) as exited:
            main([*command, *bad])
        assert exited.value.code == 2 and said in capsys.readouterr().err


def test_a_task_needing_what_a_runtime_of_your_own_lacks_is_refused_at_construction_saying_why():
    """`Runtime.lacks` against `TaskFamily.requirements`: neither Docker nor Podman lacks anything today, so a runtime
    and a family of the user's own show the check (the runtime never connected: construction touches no engine)."""
    from gymenvs.swe.family import SWEFamily
    from gymenvs.swe.tasks import FIXTURES, load_tasks

    class NoGpuRuntime(DockerRuntime):
        lacks = {"gpu": "this engine has no GPU"}

    first, *others = [task.instance_id for task in load_tasks(FIXTURES)]

    class GpuTasks(SWEFamily):
        def requirements(self, task):
            return frozenset({"gpu"}) if task.instance_id == first else frozenset()

    env = gym.make("gymenvs/SWE-v0", family=GpuTasks, runtime=object.__new__(NoGpuRuntime)).unwrapped
    assert env.refused == {first: "runtime 'docker' cannot run it: this engine has no GPU"}
    assert [task.instance_id for task in env.tasks] == others
    env.close()
    with pytest.raises(ValueError, match="this engine has no GPU"):
        gym.make("gymenvs/SWE-v0", family=GpuTasks, runtime=object.__new__(NoGpuRuntime), instance_ids=[first])
