"""gymenvs/Terminal-v0 and TerminalAgent-v0 on the Harbor fixture tasks, in real containers, driven by scripted policies."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401
from gymenvs.terminal.tasks import load_terminal_tasks

TASKS = {task.name: task for task in load_terminal_tasks()}
SUBMIT = {"name": "submit", "arguments": {}}


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


@pytest.fixture
def make_env(terminal_images):
    envs = []

    def make(env_id="gymenvs/Terminal-v0", **kwargs):
        kwargs.setdefault("command_timeout_s", 30.0)
        env = gym.make(env_id, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.mark.docker
def test_the_oracle_run_through_bash_scores_one(make_env):
    env = make_env()
    task = TASKS["gymenvs/edit-config"]
    observation, info = env.reset(options={"instance_id": task.name})
    assert observation.startswith(task.instruction.strip()) and "in /app." in observation
    assert info["instance_id"] == task.name and info["image"].startswith("gymenvs/terminal.gymenvs-edit-config:")
    observation, reward, terminated, truncated, _ = env.step(bash(task.solve_script.read_text()))
    assert "[exit code: 0]" in observation and reward == 0.0 and not terminated
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False), info
    assert (info["outcome"], info["outcome_reason"], info["status"]) == ("model", "solved", "solved")
    assert info["report"]["task"] == task.name and "reward 1" in observation


@pytest.mark.docker
def test_grading_copies_the_agents_changes_into_the_verifier_started_during_the_episode(make_env):
    """The family's `grade_ahead` starts the verifier from the episode's first step; grading then takes no snapshot of
    the agent's container."""
    env = make_env()
    task = TASKS["gymenvs/edit-config"]
    env.reset(options={"instance_id": task.name})
    env.step(bash(task.solve_script.read_text()))
    sandbox = env.unwrapped.episode_sandbox
    commits = []
    sandbox.commit = lambda *args, **kwargs: commits.append(args)
    _, reward, terminated, _, info = env.step(SUBMIT)
    assert (reward, terminated, commits) == (1.0, True, []), info


@pytest.mark.docker
def test_partial_scores_from_reward_json_and_an_empty_run(make_env):
    env = make_env()
    env.reset(options={"task": "gymenvs/csv-report"})  # Harbor's word for it; "instance_id" works too
    env.step({"name": "create_file", "arguments": {"path": "out/count.txt", "content": "7\n"}})  # relative to /app
    env.step(bash("echo bob > /app/out/top.txt"))
    observation, reward, terminated, _, info = env.step(SUBMIT)
    assert reward == pytest.approx(2 / 3, abs=1e-3) and terminated
    assert info["scores"] == {"count": 1.0, "total": 0.0, "top": 1.0, "reward": pytest.approx(0.6667)}
    assert info["outcome_reason"] == "partial" and "count 1, total 0, top 1" in observation
    env.reset(options={"instance_id": "gymenvs/csv-report"})
    assert env.step(SUBMIT)[1:3] == (0.0, True)


@pytest.mark.docker
def test_the_container_has_the_task_limits_its_workdir_and_no_tests(make_env, docker_client):
    env = make_env()
    env.reset(options={"instance_id": "gymenvs/fix-build"})
    sandbox = env.unwrapped.episode_sandbox
    host = docker_client.api.inspect_container(sandbox.id)["HostConfig"]
    assert (host["Memory"], host["NanoCpus"], host["NetworkMode"]) == (512 << 20, 10**9, "none")
    assert env.unwrapped.limits.disk_limit == 1024 << 20
    observation = env.step(bash("pwd; ls /tests /solution /logs/verifier 2>&1 | head -3"))[0]
    assert observation.startswith("/app/project\n") and observation.count("No such file or directory") == 3


@pytest.mark.docker
def test_the_turn_limit_grades_and_truncates(make_env):
    env = make_env(max_turns=1)
    task = TASKS["gymenvs/fix-build"]
    env.reset(options={"instance_id": task.name})
    observation, reward, terminated, truncated, info = env.step(bash(task.solve_script.read_text()))
    assert (reward, terminated, truncated) == (1.0, False, True)
    assert (info["outcome"], info["outcome_reason"]) == ("model", "solved")  # graded at the limit: solved all the same


@pytest.mark.docker
def test_the_reference_agent_solves_a_task_through_interception(make_env):
    env = make_env("gymenvs/TerminalAgent-v0", agent="reference", call_timeout_s=60.0)
    task = TASKS["gymenvs/configure-service"]
    observation, info = env.reset(options={"instance_id": task.name})
    assert observation.startswith("[system]\nYou are an autonomous agent working in a Linux container, in /root.")
    assert f"[user]\n{task.instruction.strip()}" in observation
    assert [tool["function"]["name"] for tool in info["tools"]] == ["bash", "submit"]
    observation, *_ = env.step(bash("pwd"))
    assert observation.startswith("[tool] (bash)\n/root\n[exit code: 0]")  # the image's WORKDIR
    observation, *_ = env.step(bash(task.solve_script.read_text()))
    assert "[exit code: 0]" in observation
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (1.0, True, False), info.get("error")
    assert info["outcome_reason"] == "solved" and "reference agent: submitted" in info["agent_log"]


def test_bad_options_are_value_errors():
    with pytest.raises(ValueError, match="mem_limit"):
        gym.make("gymenvs/Terminal-v0", mem_limit="1g")  # the task sets the memory, not the env
    with pytest.raises(ValueError, match="instance_ids"):
        gym.make("gymenvs/Terminal-v0", instance_ids=["nope"])
    with pytest.raises(ValueError, match="verifier_timeout_s"):
        gym.make("gymenvs/Terminal-v0", verifier_timeout_s=0.0)
    with pytest.raises(ValueError, match="keep_changes"):
        gym.make("gymenvs/Terminal-v0", keep_changes="yes")
    with pytest.raises(ValueError, match="changes_limit"):
        gym.make("gymenvs/Terminal-v0", keep_changes=True, changes_limit="4 MB")


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_solves_a_task_in_its_derived_image(make_env, terminal_images, runtime):
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import MINI_SWE_AGENT

    task = TASKS["gymenvs/edit-config"]
    install_agent(runtime, MINI_SWE_AGENT, [terminal_images[task.name]], progress=False)
    env = make_env("gymenvs/TerminalAgent-v0", agent="mini-swe-agent", call_timeout_s=120.0)
    observation, info = env.reset(options={"instance_id": task.name})
    assert info["image"] == terminal_images[task.name] + "-mini-swe-agent-2.4.6"
    assert task.instruction.splitlines()[0] in observation
    observation, *_ = env.step(bash("pwd"))
    assert '"output": "/app\\n"' in observation
    env.step(bash(task.solve_script.read_text()))
    observation, reward, terminated, truncated, info = env.step(bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))
    assert (reward, terminated, truncated) == (1.0, True, False), (info.get("error"), info["agent_log"][-2000:])


@pytest.mark.docker
def test_the_agent_timeout_of_task_toml_limits_the_agent_episode(make_env, tmp_path):
    import shutil

    from gymenvs.terminal.tasks import fixtures_path

    folder = tmp_path / "edit-config"
    shutil.copytree(fixtures_path() / "edit-config", folder)
    toml = (folder / "task.toml").read_text().replace("[agent]\ntimeout_sec = 300.0", "[agent]\ntimeout_sec = 4.0")
    (folder / "task.toml").write_text(toml)
    env = make_env("gymenvs/TerminalAgent-v0", dataset=str(folder), agent="reference", call_timeout_s=60.0)
    env.reset(seed=0)
    assert env.unwrapped.episode_timeout_s() == 4.0
    observation, reward, terminated, truncated, info = env.step(bash("sleep 8"))
    assert (info["outcome"], info["outcome_reason"]) == ("model", "time_limit") and truncated and reward == 0.0
    assert "wall-clock limit (4 s)" in info["error"]


def copy_fixture(tmp_path, name, *replacements):
    """A copy of the fixture task `name` whose task.toml has each (old, new) replaced, read back."""
    import shutil

    from gymenvs.terminal.task import TerminalTask
    from gymenvs.terminal.tasks import fixtures_path

    folder = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(fixtures_path() / name, folder)
    toml = (folder / "task.toml").read_text()
    for old, new in replacements:
        toml = toml.replace(old, new)
    (folder / "task.toml").write_text(toml)
    return TerminalTask.from_dir(folder)


def test_the_network_follows_the_task_unless_the_env_forbids_it(tmp_path):
    online = copy_fixture(tmp_path, "edit-config", ("allow_internet = false", "allow_internet = true"))
    gpu = copy_fixture(tmp_path, "edit-config", ("allow_internet = false", "gpus = 1"))
    offline = TASKS["gymenvs/edit-config"]
    for internet, expected in ((True, [True, False]), (False, [False, False])):
        env = gym.make("gymenvs/Terminal-v0", internet=internet)
        try:
            assert env.unwrapped.family.options.internet is internet
            limits = [env.unwrapped.family.limits(task) for task in (online, offline)]
            assert [limit.network for limit in limits] == expected
            assert (limits[0].mem_limit, limits[0].cpus, limits[0].disk_limit) == ("512m", 1.0, 1024 << 20)
            with pytest.raises(ValueError, match="asks for 1 GPU"):
                env.unwrapped.family.limits(gpu)
        finally:
            env.close()


@pytest.mark.docker
@pytest.mark.slow
def test_gymnasium_env_checker_passes(make_env):
    from gymnasium.utils.env_checker import check_env

    check_env(make_env(max_turns=3, instance_ids=["gymenvs/csv-report"]).unwrapped, skip_render_check=True)


@pytest.mark.docker
def test_a_missing_derived_image_says_how_to_build_it(make_env, terminal_images):
    from gymenvs.container.agent.specs import AgentSpec
    from gymenvs.container.runtime import SandboxError

    env = make_env("gymenvs/TerminalAgent-v0", agent=AgentSpec("ghost", command="true", image_suffix="ghost-1"))
    image = terminal_images["gymenvs/edit-config"]
    with pytest.raises(SandboxError, match=f"install-agent ghost {image}`"):
        env.reset(options={"instance_id": "gymenvs/edit-config"})


@pytest.mark.docker
def test_a_build_past_build_timeout_sec_is_cancelled_with_an_error_naming_the_task(tmp_path, runtime, docker_client,
                                                                                    swe_images):
    """A wall-clock limit (docker-py's `timeout=` is per read: a silent `RUN sleep` would outlive it)."""
    from gymenvs.container.runtime import ImageBuildError
    from gymenvs.terminal.images import ensure_task_image, image_name
    from gymenvs.terminal.task import TerminalTask

    folder = tmp_path / "fix21-slow-build"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "instruction.md").write_text("Nothing.\n")
    (folder / "task.toml").write_text('[task]\nname = "fix21-slow-build"\n[environment]\nbuild_timeout_sec = 2\n')
    (folder / "environment" / "Dockerfile").write_text("FROM gymenvs/swe-base:bookworm\nRUN sleep 120\n")
    (folder / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    task = TerminalTask.from_dir(folder)
    with pytest.raises(ImageBuildError, match=r"task 'fix21-slow-build' \(\[environment\] build_timeout_sec = 2\): "
                                              r"building .* took more than 2 s; the build was cancelled"):
        ensure_task_image(runtime, task)
    assert not runtime.image_exists(image_name(task))
    for _ in range(30):  # the engine cancels the build's RUN step once it sees the connection gone
        listed = docker_client.containers.list(ignore_removed=True)  # another test process may remove one meanwhile
        running = [c for c in listed if "sleep 120" in " ".join(c.attrs["Config"]["Cmd"] or [])]
        if not running:
            break
        time.sleep(0.5)
    assert not running


@pytest.mark.docker
def test_the_images_entrypoint_runs_and_its_cmd_does_not_as_in_harbor(tmp_path, make_env):
    """Harbor replaces the image's CMD by a keep-alive and keeps its ENTRYPOINT (which gets the keep-alive as its
    arguments); so does the agent's container here."""
    import shutil

    from gymenvs.terminal.tasks import fixtures_path

    folder = tmp_path / "entrypoint"
    shutil.copytree(fixtures_path() / "edit-config", folder)
    (folder / "task.toml").write_text((folder / "task.toml").read_text().replace("gymenvs/edit-config", "entrypoint"))
    with open(folder / "environment" / "Dockerfile", "a") as dockerfile:
        dockerfile.write('RUN printf \'#!/bin/sh\\necho "$@" > /tmp/entrypoint-args\\nexec "$@"\\n\' > /ep.sh\n'
                         'RUN chmod +x /ep.sh\nENTRYPOINT ["/ep.sh"]\nCMD ["python3", "-m", "http.server", "8000"]\n')
    env = make_env(dataset=str(folder))
    env.reset(seed=0)
    observation, *_ = env.step(bash("cat /tmp/entrypoint-args; python3 -c 'import socket; socket.create_connection"
                                    "((\"127.0.0.1\", 8000), timeout=2)' 2>&1 | tail -1"))
    assert observation.startswith("sleep ") and "ConnectionRefusedError" in observation


@pytest.mark.docker
def test_the_report_keeps_the_whole_test_output_and_its_tail(tmp_path, make_env):
    import shutil

    from gymenvs.terminal.tasks import fixtures_path

    folder = tmp_path / "long-log"
    shutil.copytree(fixtures_path() / "edit-config", folder)
    (folder / "task.toml").write_text((folder / "task.toml").read_text().replace("gymenvs/edit-config", "long-log"))
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\nseq 1 3000 | sed 's/^/check /'\necho 1 > /logs/verifier/reward.txt\n")
    env = make_env(dataset=str(folder))
    env.reset(seed=0)
    *_, info = env.step(SUBMIT)
    log = info["report"]["log"]
    assert log.startswith("check 1\ncheck 2\n") and "check 3000\n" in log and len(log) > 4000
    assert info["report"]["log_tail"] == log[-4000:]


@pytest.mark.docker
def test_a_service_the_oracle_leaves_running_through_bash_is_up_for_the_tests(make_env):
    """The episode's grading records the services in the running container: a paused one runs no process, and
    would let the recording find none (the fixture then scored 0 in an episode, 1 in `gymenvs tasks validate`)."""
    env = make_env(instance_ids=["gymenvs/serve-status"])
    env.reset(seed=0)
    env.step(bash(TASKS["gymenvs/serve-status"].solve_script.read_text()))
    _, reward, *_, info = env.step(SUBMIT)
    assert reward == 1.0, info["report"]["log_tail"]
    assert "python3 -m http.server 8000 --bind 127.0.0.1 (ports 8000: listening)" in info["report"]["services"]
