"""What every runtime must do the same, run on each one (`RUNTIMES`) whose engine answers:

- SWE-v0 on a fixture task: the gold patch grades 1, an empty patch 0;
- SWEAgent-v0: the reference agent (in the container, its calls carried over its forwarder's exec stream)
  applying the gold patch grades 1;
- Terminal-v0 on a Harbor task (its image built on first use, its grading on a snapshot with volumes): the oracle
  scores 1, an empty run 0;
- a container killed from outside, or by the OOM killer, and a file written past the disk limit, end the episode
  as infra;
- an allowlist lets a container reach the allowed address only;
- what a process killed by SIGKILL left (a container, a grading snapshot, a volume) is reaped by the next.

A runtime whose engine does not answer is skipped, saying why (in CI a skip fails: .ci/setup starts Docker and
rootful Podman)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from env_support import envs_made
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.images import BASE_IMAGE
from gymenvs.container.runtime import RUNTIMES, Limits, SandboxError, shared_runtime

from ..tools_support import SUBMIT, TASKS, bash, ending, write_and_apply
from .test_egress import probe

pytestmark = pytest.mark.docker

#: A fixture task whose tests run in a second or two (textkit: the first of the fixtures).
TASK = FIXTURE_IDS[0]
#: A Harbor fixture task, and what its oracle runs.
HARBOR_TASK = "gymenvs/edit-config"


@pytest.fixture(scope="module", params=list(RUNTIMES))
def runtime_name(request):
    """Each runtime by name, with the base and fixture images present in its own store (built there if missing)."""
    from gymenvs.container.images import build_base_image
    from gymenvs.swe.images import build_fixture_images

    try:
        runtime = shared_runtime(request.param)
    except SandboxError as exc:
        pytest.skip(f"runtime {request.param!r}: {exc}")
    build_base_image(runtime, tag=BASE_IMAGE, progress=False)
    build_fixture_images(runtime, base=BASE_IMAGE, progress=False)
    return request.param


@pytest.fixture
def make(runtime_name):
    with envs_made("gymenvs/SWE-v0", runtime=runtime_name, command_timeout_s=20.0) as make:
        yield make


def started(make):
    env = make()
    env.reset(options={"instance_id": TASK})
    return env


def test_the_gold_patch_grades_one(make, runtime_name):
    env = started(make)
    assert env.unwrapped.runtime.name == runtime_name
    applied = env.step(write_and_apply(TASKS[TASK].patch, "gold.patch"))
    assert applied[4]["exit_code"] == 0, applied[0]
    _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")
    assert info["report"]["fail_to_pass"] == dict.fromkeys(TASKS[TASK].fail_to_pass, "PASSED")


def test_an_empty_patch_grades_zero(make):
    _, reward, terminated, truncated, info = started(make).step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, True, False) and ending(info) == ("model", "failed")
    assert info["report"]["status"] == "unresolved" and info["report"]["patch_is_empty"]


def test_the_reference_agent_applying_the_gold_patch_grades_one(runtime_name):
    from ..agent.agent_support import apply_patch

    with envs_made("gymenvs/SWEAgent-v0", runtime=runtime_name, call_timeout_s=60.0) as make_agent:
        env = make_agent()
        env.reset(options={"instance_id": TASK})
        env.step(apply_patch(TASKS[TASK].patch))
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")


@pytest.mark.parametrize("oracle", [True, False], ids=["oracle", "empty"])
def test_a_harbor_task_scores_one_after_its_oracle_and_zero_after_nothing(runtime_name, oracle):
    from gymenvs.terminal.tasks import load_terminal_tasks

    (task,) = [task for task in load_terminal_tasks() if task.name == HARBOR_TASK]
    with envs_made("gymenvs/Terminal-v0", runtime=runtime_name, command_timeout_s=30.0) as make_terminal:
        env = make_terminal()
        env.reset(options={"instance_id": HARBOR_TASK})
        if oracle:
            assert env.step(bash(task.solve_script.read_text()))[4]["exit_code"] == 0
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    expected = (1.0, ("model", "solved")) if oracle else (0.0, ("model", "failed"))
    assert (reward, ending(info)) == expected and terminated and not truncated, info.get("outcome_detail")


def test_a_container_killed_from_outside_ends_the_episode_as_infra(make):
    env = started(make)
    runtime = env.unwrapped.runtime
    runtime.client.api.kill(env.unwrapped.episode_sandbox.id)  # from outside, by the engine's own API
    _, reward, terminated, truncated, info = env.step(bash("echo still here"))
    assert (reward, terminated, truncated) == (0.0, False, True), info
    assert ending(info) == ("infra", "container_died"), info.get("outcome_detail")


#: How each runtime's episode ends when the OOM killer stops its container: Podman 4.3 (cgroup v1, runc, conmon 2.1.6,
#: measured on the CI machines) does not report the container as OOM-killed (conmon writes its `oom` marker into the
#: API service's working directory), so the episode ends as a container that died.
OOM_REASONS = {"docker": "oom_killed", "podman": "container_died"}


def test_a_container_the_oom_killer_stops_mid_command_ends_the_episode_as_infra(make, runtime_name):
    from ..test_faults import FILL_MEMORY, MAIN_PROCESS_FIRST

    env = make(mem_limit="56m")  # under what /dev/shm holds (63-64 MiB)
    env.reset(options={"instance_id": TASK})
    _, reward, terminated, truncated, info = env.step(bash(f"{MAIN_PROCESS_FIRST}; {FILL_MEMORY}"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert ending(info) == ("infra", OOM_REASONS[runtime_name]) and "exit code 137" in info["outcome_detail"], info


def test_a_file_written_past_the_disk_limit_ends_the_episode_as_infra_ungraded(make):
    env = make(disk_limit="40m")
    env.reset(options={"instance_id": TASK})
    env.step(bash("head -c 60m /dev/zero > /tmp/fill"))
    _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and ending(info) == ("infra", "disk_limit")
    assert info["report"]["status"] == "error"


def test_an_allowlist_lets_a_container_reach_the_allowed_address_only(runtime_name):
    runtime = shared_runtime(runtime_name)
    servers = [runtime.start(BASE_IMAGE, role="test", episode_id="egress", limits=Limits(network=True)) for _ in range(2)]
    try:
        for server in servers:
            server.open_exec(["python3", "-m", "http.server", "8000"])
        allowed, other = (runtime.client.api.inspect_container(s.id)["NetworkSettings"]["IPAddress"] for s in servers)
        sandbox = runtime.start(BASE_IMAGE, role="test", episode_id="egress",
                                limits=Limits(network=True, allowed_hosts=(allowed,)))
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
    from gymenvs.container.runtime import shared_runtime

    runtime, nonce = shared_runtime(sys.argv[1]), uuid.uuid4().hex[:12]
    sandbox = runtime.start(sys.argv[2], role="agent", episode_id="reaper-test")
    sandbox.commit("gymenvs-terminal-snapshot", nonce)
    volume = runtime.create_volume(f"gymenvs-terminal-{nonce}-logs", role="verifier")
    print(json.dumps([sandbox.name, f"gymenvs-terminal-snapshot:{nonce}", volume]), flush=True)
    time.sleep(600)
""")


def test_what_a_killed_process_left_is_reaped_by_the_next(runtime_name):
    from gymenvs.container.reaper import reap

    root = str(Path(__file__).resolve().parents[3])
    owner = subprocess.Popen([sys.executable, "-c", OWNER, runtime_name, BASE_IMAGE], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": root})
    left = json.loads(owner.stdout.readline())
    owner.send_signal(signal.SIGKILL)  # no atexit, no finalizer
    owner.wait(30)
    runtime = shared_runtime(runtime_name)
    assert runtime.image_exists(left[1])
    reaped = reap(runtime)
    container, snapshot, volume = left
    # Podman reports the snapshot by its qualified name, docker.io/library/<name>
    assert {container, volume} <= set(reaped) and any(name.endswith(snapshot) for name in reaped), reaped
    assert not runtime.image_exists(snapshot)
