"""The one reaper (`gymenvs.container.reaper`): what a process killed by SIGKILL left behind (an agent container, a
Harbor grading snapshot image and its two grading volumes, an agent channel directory in the temp folder) is
removed by the next gymenvs process, at its first reset or by `gymenvs swe reap`; never what a live process owns."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from pathlib import Path

import docker
import pytest

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]

#: A process that makes one of each kind of leftover through the runtime, as an episode and a Harbor grading do
#: (`gymenvs.terminal.grading`: a snapshot `gymenvs-terminal-snapshot:<nonce>`, volumes `gymenvs-terminal-<nonce>-*`),
#: prints their names as JSON, then waits to be killed.
OWNER = textwrap.dedent("""
    import json, sys, time, uuid
    from gymenvs.container.agent.channel import new_channel_directory
    from gymenvs.container.runtime.docker import DockerRuntime

    runtime = DockerRuntime()
    nonce = uuid.uuid4().hex[:12]
    agent = runtime.start(sys.argv[1], role="agent", episode_id="reaper-test")
    snapshot = agent.commit("gymenvs-terminal-snapshot", nonce)
    volumes = [runtime.create_volume(f"gymenvs-terminal-{nonce}-{name}", role="verifier") for name in ("logs", "tests")]
    print(json.dumps({"container": agent.name, "image": f"gymenvs-terminal-snapshot:{nonce}", "image_id": snapshot,
                      "volumes": volumes, "directory": str(new_channel_directory())}), flush=True)
    time.sleep(600)
""")

#: A new process: three SWE-v0 envs, built (no engine reached) then reset; one reaping for the three.
NEXT_PROCESS = textwrap.dedent("""
    import gymnasium as gym, gymenvs
    from gymenvs.container import reaper, runtime
    calls = []
    reap = reaper.reap
    reaper.reap = lambda rt: calls.append(1) or reap(rt)
    envs = [gym.make("gymenvs/SWE-v0") for _ in range(3)]
    assert not runtime._shared and not calls  # constructing touches no engine
    for env in envs:
        env.reset(seed=0)
    print(len(calls), " ".join(envs[0].unwrapped.reaped))
    for env in envs:
        env.close()
""")


def start_owner(image: str) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen([sys.executable, "-c", OWNER, image], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = process.stdout.readline()
    assert line, "the owner process died before it made its leftovers"
    return process, json.loads(line)


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)  # no atexit, no finalizer: everything it made stays behind
    process.wait(30)


def present(client, made: dict) -> dict[str, bool]:
    """Which of what an owner made still exists, on the engine and in the temp folder."""
    def exists(get, name) -> bool:
        try:
            get(name)
        except docker.errors.NotFound:
            return False
        return True

    return {"container": exists(client.containers.get, made["container"]),
            "image": exists(client.images.get, made["image"]),
            **{volume: exists(client.volumes.get, volume) for volume in made["volumes"]},
            "directory": Path(made["directory"]).is_dir()}


def names(made: dict) -> set[str]:
    """What the reaper reports removing, for these leftovers."""
    return {made["container"], made["image"], *made["volumes"], made["directory"]}


def remove(client, made: dict) -> None:
    """Remove what a test's owner made (for the live owner's, and for a reaper that failed)."""
    for remove_one in (lambda: client.api.remove_container(made["container"], force=True, v=True),
                       lambda: client.api.remove_image(made["image_id"], force=True),
                       *[lambda volume=volume: client.api.remove_volume(volume, force=True) for volume in made["volumes"]]):
        try:
            remove_one()
        except docker.errors.NotFound:
            pass
    shutil.rmtree(made["directory"], ignore_errors=True)


@pytest.fixture
def live_owner(docker_client, swe_images):
    """A live process owning one leftover of each kind: no reaper may take any of them."""
    process, made = start_owner(swe_images)
    yield made
    kill(process)
    remove(docker_client, made)


def reap_at_first_reset() -> list[str]:
    result = subprocess.run([sys.executable, "-c", NEXT_PROCESS], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    calls, *reaped = result.stdout.split()
    assert calls == "1"  # three envs, one reaping
    return reaped


def reap_by_command() -> list[str]:
    result = subprocess.run([sys.executable, "-m", "gymenvs.cli", "swe", "reap"], capture_output=True, text=True, timeout=300,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("removed ")
    return result.stdout.strip().partition(": ")[2].split(", ")


@pytest.mark.parametrize("reaping", [reap_at_first_reset, reap_by_command], ids=["first_reset", "gymenvs_swe_reap"])
def test_what_a_killed_process_left_is_reaped_and_what_a_live_one_owns_is_kept(docker_client, swe_images, live_owner,
                                                                               reaping):
    dead, made = start_owner(swe_images)
    try:
        assert all(present(docker_client, made).values())  # one of each kind, left behind by the kill
        kill(dead)
        reaped = reaping()  # (another test process's first reset may have reaped some of them first)
        left = present(docker_client, made)
        assert not any(left.values()), left
        assert all(present(docker_client, live_owner).values()) and not names(live_owner) & set(reaped)
    finally:
        remove(docker_client, made)


def test_the_reaper_names_what_it_removed(runtime, docker_client, swe_images):
    """Checked in this process, right after the kill. Any new gymenvs process on the host reaps at its first reset (the
    engine's tests run on two workers), so another may take some of the leftovers first: then the reaping here named
    less, and it is tried again with a new owner."""
    from gymenvs.container.reaper import reap

    for _ in range(3):
        dead, made = start_owner(swe_images)
        try:
            kill(dead)
            reaped = set(reap(runtime))
            assert not any(present(docker_client, made).values())
        finally:
            remove(docker_client, made)
        if names(made) <= reaped:
            return
    pytest.fail(f"the reaper removed {sorted(names(made))} but named only {sorted(names(made) & reaped)}, three times")


def test_a_directory_of_this_process_or_not_named_by_the_reaper_is_kept():
    from gymenvs.container.reaper import owned_directory, reap_directories

    mine = owned_directory("test")  # this process's: alive
    other = Path(tempfile.mkdtemp(prefix="gymenvs-notes-"))  # not a name `owned_directory` gives
    try:
        reaped = reap_directories()
        assert mine.is_dir() and other.is_dir() and not {str(mine), str(other)} & set(reaped)
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def test_reaping_while_another_process_removes_its_snapshots_does_not_fail(runtime, swe_images):
    """A process's first reset reaps while other processes commit and remove their grading snapshots (seen with the
    engine's tests on two workers: the SDK's image listing inspected each image and failed on one removed meanwhile,
    and the reset with it). Here one thread commits and removes snapshots as fast as it can while this one reaps."""
    from gymenvs.container.reaper import reap

    box = runtime.start(swe_images, role="test", episode_id="reap-race")
    stop, churned = threading.Event(), []

    def churn() -> None:
        while not stop.is_set():
            runtime.remove_image(box.commit("gymenvs-terminal-snapshot", uuid.uuid4().hex[:12]))
            churned.append(1)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(60):
            reap(runtime)
    finally:
        stop.set()
        thread.join()
        box.remove()
    assert churned
