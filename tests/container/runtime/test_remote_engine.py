"""The conformance rows that apply to a remote engine, run against one whose files this host cannot see: a Docker
engine nested in a container of the local one, reached only over TCP (`gymenvs.container.runtime.docker.nested`).

Nothing of this host is mounted into its containers, so what passes here went through the engine's API alone:
images built there (the fixture images by `gymenvs swe build-images --engine`), files written and read,
grading snapshots committed, the agent's LLM calls carried over its forwarder's exec stream (the reference
agent's, and Claude Code's, installed there by `gymenvs swe install-agent --engine`), and that forwarder's death
ending its episode only. The base image is
copied in from the local engine through both engines' APIs (`docker save` into `docker load`), since
bootstrapping it again would add a minute (docs/runtimes.md has that figure). The egress allowlist needs the
engine on this host (it is set from here, in the container's network namespace): it has no row here.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from env_support import envs_made

from gymenvs.container.images import BASE_IMAGE, build_base_image
from gymenvs.container.runtime import shared_runtime
from gymenvs.swe.images import image_for

from ..tools_support import SUBMIT, TASKS, bash, ending, write_and_apply
from .test_conformance import HARBOR_TASK, TASK, started

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def engine():
    """The nested engine's URL, with the base and fixture images in its store; removed with everything in it."""
    from gymenvs.container.runtime.docker.nested import NestedEngine, build_nested_image

    local = shared_runtime("docker")
    build_base_image(local, tag=BASE_IMAGE, progress=False)
    build_nested_image(local)
    with NestedEngine(local) as nested:
        remote = shared_runtime("docker", nested.url)
        remote.client.api.load_image(local.client.api.get_image(BASE_IMAGE))
        started = time.monotonic()
        built = subprocess.run([sys.executable, "-c", "import sys; from gymenvs.cli import main; sys.exit(main())",
                                "swe", "build-images", "--engine", nested.url], capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stderr[-3000:]
        print(f"fixture images built in the nested engine in {time.monotonic() - started:.1f} s")
        yield nested.url


@pytest.fixture
def make(engine):
    with envs_made("gymenvs/SWE-v0", runtime="docker", engine=engine, command_timeout_s=20.0) as make:
        yield make


def test_nothing_of_this_host_is_mounted_and_the_gold_patch_grades_one(make, engine):
    env = started(make)
    sandbox = env.unwrapped.episode_sandbox
    assert shared_runtime("docker", engine).client.api.inspect_container(sandbox.id)["Mounts"] == []
    assert env.step(write_and_apply(TASKS[TASK].patch, "gold.patch"))[4]["exit_code"] == 0
    _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")


def test_an_empty_patch_grades_zero(make):
    _, reward, terminated, truncated, info = started(make).step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, True, False) and ending(info) == ("model", "failed")


def test_the_reference_agent_reaches_its_channel_and_its_gold_patch_grades_one(engine):
    from ..agent.agent_support import apply_patch

    with envs_made("gymenvs/SWEAgent-v0", runtime="docker", engine=engine, call_timeout_s=60.0) as make_agent:
        env = make_agent()
        env.reset(options={"instance_id": TASK})
        env.step(apply_patch(TASKS[TASK].patch))
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")


def test_its_calls_cross_the_forwarder_and_killing_that_ends_only_its_episode(engine):
    """This host cannot listen in the nested engine's containers (the pid it reports is not this host's): the agent's
    calls cross the forwarder's exec stream, and the forwarder killed ends its episode only (a local one goes on)."""
    from ..agent.agent_support import apply_patch

    with (envs_made("gymenvs/SWEAgent-v0", runtime="docker", engine=engine, call_timeout_s=60.0) as make_remote,
          envs_made("gymenvs/SWEAgent-v0", call_timeout_s=60.0) as make_local):
        killer, other = make_remote(), make_local()
        killer.reset(options={"instance_id": TASK})
        other.reset(options={"instance_id": TASK})
        *_, truncated, info = killer.step(bash("kill -9 $GYMENVS_FORWARDER_PID; echo killed"))
        assert truncated and "exited with code 3" in info["error"] and "cannot reach the model endpoint" in info["agent_log"]
        assert ending(info) == ("model", "agent_exited")  # the agent's own command did it
        other.step(apply_patch(TASKS[TASK].patch))
        _, reward, terminated, truncated, info = other.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False), info.get("error")


def test_a_container_killed_from_outside_ends_the_episode_as_infra(make, engine):
    env = started(make)
    shared_runtime("docker", engine).client.api.kill(env.unwrapped.episode_sandbox.id)
    _, reward, terminated, truncated, info = env.step(bash("echo still here"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert ending(info) == ("infra", "container_died"), info.get("outcome_detail")


@pytest.mark.parametrize("oracle", [True, False], ids=["oracle", "empty"])
def test_a_harbor_task_scores_one_after_its_oracle_and_zero_after_nothing(engine, oracle):
    from gymenvs.terminal.tasks import load_terminal_tasks

    (task,) = [task for task in load_terminal_tasks() if task.name == HARBOR_TASK]
    with envs_made("gymenvs/Terminal-v0", runtime="docker", engine=engine, command_timeout_s=30.0) as make_terminal:
        env = make_terminal()
        env.reset(options={"instance_id": HARBOR_TASK})  # its image is built in the nested engine on first use
        if oracle:
            assert env.step(bash(task.solve_script.read_text()))[4]["exit_code"] == 0
        _, reward, terminated, truncated, info = env.step(SUBMIT)
    expected = (1.0, ("model", "solved")) if oracle else (0.0, ("model", "failed"))
    assert (reward, ending(info)) == expected and terminated and not truncated, info.get("outcome_detail")


def test_an_agent_cli_installed_in_the_remote_engine_applies_the_gold_patch(engine):
    from ..agent.cli_support import CLIS, gold_patch_call

    cli = CLIS["claude-code"]
    installed = subprocess.run([sys.executable, "-c", "import sys; from gymenvs.cli import main; sys.exit(main())",
                                "swe", "install-agent", cli.agent, image_for(TASKS[TASK]), "--engine", engine, "--quiet"],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    with envs_made("gymenvs/SWEAgent-v0", runtime="docker", engine=engine, agent=cli.agent, instance_ids=[TASK],
                   call_timeout_s=120.0, max_turns=10) as make_agent:
        env = make_agent()
        _, info = env.reset()
        assert info["request"]["wire"] == cli.wire
        env.step(gold_patch_call(cli, TASK))
        _, reward, terminated, truncated, info = env.step("The issue is fixed.")
    assert (reward, terminated, truncated) == (1.0, True, False) and ending(info) == ("model", "solved"), info.get("error")
