"""Faults injected into the real Docker engine: an episode a fault ends says `infra`, carries no
reward a trainer may learn from, and leaves nothing behind; a fault the agent caused itself is an
observation, and its episode goes on."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, cast

import docker
import gymnasium as gym
import pytest
from swe.swe_support import FIXTURE_IDS, own_containers

from gymenvs.container.runtime.docker import DockerRuntime
from gymenvs.container.runtime.docker.chaos import EngineProxy, GradingKiller
from gymenvs.core import is_trainable
from wrappers.vector import ConcurrentVectorEnv

from .tools_support import SUBMIT, TASKS, bash, ending, start, submit, write_and_apply

pytestmark = pytest.mark.docker

#: Raise the container's main process (`sleep`, the child of its init) to the first victim of the
#: OOM killer, so that running out of memory kills the container and not only the command.
MAIN_PROCESS_FIRST = 'for p in /proc/[0-9]*; do [ "$(cat $p/comm)" = sleep ] && echo 1000 > $p/oom_score_adj; done'
#: Fill the container's memory with a file in /dev/shm (tmpfs: charged to the container, to no process).
FILL_MEMORY = "head -c 512m /dev/zero > /dev/shm/fill"


def test_a_command_the_oom_killer_stops_is_the_agents_observation_and_the_episode_goes_on(make_env, docker_client):
    env = start(make_env, FIXTURE_IDS[0], mem_limit="64m")
    observation, reward, terminated, truncated, info = env.step(bash('python3 -c "x = bytearray(1 << 30)"'))
    # This engine kills the largest process of the container, the command; the container runs on.
    assert "Killed" in observation and observation.endswith("[exit code: 137]") and info["exit_code"] == 137
    assert not (terminated or truncated) and "outcome" not in info
    assert docker_client.api.inspect_container(env.unwrapped.state()["container"])["State"]["Running"]
    assert env.step(bash("echo still here"))[0] == "still here\n[exit code: 0]"
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert terminated and ending(info) == ("model", "failed") and is_trainable(info)


def test_a_container_the_oom_killer_stops_mid_command_ends_the_episode_as_infra(make_env, docker_client):
    env = start(make_env, FIXTURE_IDS[0], mem_limit="64m")
    observation, reward, terminated, truncated, info = env.step(bash(f"{MAIN_PROCESS_FIRST}; {FILL_MEMORY}"))
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "oom_killed") and "exceeding its memory limit" in info["outcome_detail"]
    assert "episode cannot go on" in observation
    assert own_containers(docker_client) == []
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    assert env.step(bash("echo back"))[0] == "back\n[exit code: 0]"


def test_a_container_the_oom_killer_stops_before_submit_is_not_graded(make_env, docker_client):
    env = start(make_env, FIXTURE_IDS[0], mem_limit="64m")
    container = env.unwrapped.state()["container"]
    assert not env.step(bash(f"{MAIN_PROCESS_FIRST}; (sleep 1; {FILL_MEMORY}) &"))[3]
    docker_client.api.wait(container, timeout=60)  # the engine kills it in the background
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "oom_killed") and info["report"]["status"] == "error"
    assert own_containers(docker_client) == []


@pytest.mark.parametrize("while_running", [None, "pytest"], ids=["at_start", "while_testing"])
def test_a_grading_container_killed_mid_grading_ends_as_infra_with_nothing_left(make_env, runtime, docker_client,
                                                                               while_running):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id)
    env.step(write_and_apply(task.patch, "gold.patch"))  # work that would resolve the task
    if while_running:  # slowly: the tests import the package for some seconds, time enough to be killed
        env.step(bash("echo 'import time; time.sleep(5)' >> textkit/slug.py"))
    with GradingKiller(runtime, while_running) as killer:
        observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert killer.killed, "the grading container was never seen running"
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "container_died") and info["report"]["status"] == "error", info["outcome_detail"]
    assert "grading could not run: the container is exited" in info["outcome_detail"]
    assert own_containers(docker_client) == []


#: This module's own tag of the first fixture task's image: removing it touches no other test's image.
OWN_TAG = f"gymenvs-chaos-faults-{os.getpid()}/{{instance_id}}:latest"


@pytest.fixture
def own_image(swe_images, docker_client):
    """The first fixture task's image under `OWN_TAG` (re-tagged if a test removed it; untagged at the end)."""
    task = TASKS[FIXTURE_IDS[0]]
    name = OWN_TAG.format(instance_id=task.instance_id)
    repository, tag = name.rsplit(":", 1)

    def tag_again() -> str:
        docker_client.images.get(task.image).tag(repository, tag)
        return name

    tag_again()
    yield tag_again
    try:
        docker_client.images.remove(name)
    except docker.errors.ImageNotFound:
        pass


def own_image_env(make_env, **kwargs):
    """A SWE-v0 on the first fixture task, running from `OWN_TAG`, its episode started."""
    env = make_env(image_template=OWN_TAG, **kwargs)
    env.unwrapped.tasks = tuple(dataclasses.replace(task, image=None) for task in env.unwrapped.tasks)
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    return env


def test_an_image_removed_between_reset_and_grading_ends_as_infra_image_missing(make_env, docker_client, own_image):
    task = TASKS[FIXTURE_IDS[0]]
    env = own_image_env(make_env)
    # Before the first step, which starts the grading container: the engine refuses it (404), then again at submit.
    docker_client.images.remove(own_image())
    env.step(write_and_apply(task.patch, "gold.patch"))  # work that would resolve the task
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "image_missing") and info["report"]["status"] == "error"
    assert "grading could not run" in info["outcome_detail"] and "is not present locally" in info["outcome_detail"]
    assert own_containers(docker_client) == []
    own_image()
    env.reset(options={"instance_id": task.instance_id})
    env.step(write_and_apply(task.patch, "gold.patch"))
    assert env.step(SUBMIT)[1] == 1.0  # the same work, graded once the image is back


def pause_from_outside(client, container: str) -> None:
    """Freeze `container` through the engine, asking again if runc gives up (`unable to freeze`, as under heavy load)."""
    for attempt in range(5):
        try:
            return client.api.pause(container)
        except docker.errors.APIError as exc:
            if "unable to freeze" not in str(exc) or attempt == 4:
                raise
            time.sleep(0.5)


def test_a_container_paused_from_outside_makes_the_engine_refuse_the_command_and_ends_as_infra(make_env, docker_client):
    env = start(make_env, FIXTURE_IDS[0])
    pause_from_outside(docker_client, env.unwrapped.state()["container"])  # the engine answers 409 to every exec
    observation, reward, terminated, truncated, info = env.step(bash("echo hi"))
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "container_paused") and "paused from outside" in info["outcome_detail"]
    assert own_containers(docker_client) == []


def test_a_container_paused_before_submit_is_not_graded(make_env, docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id)
    env.step(write_and_apply(task.patch, "gold.patch"))
    pause_from_outside(docker_client, env.unwrapped.state()["container"])
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and ending(info) == ("infra", "container_paused")
    assert own_containers(docker_client) == []


def test_the_disk_limit_hit_during_grading_ends_as_infra_disk_limit(make_env, docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id, disk_limit="40m")
    env.step(write_and_apply(task.patch, "gold.patch"))
    # The package writes past the grading container's disk limit (the agent's own limit) when the tests import it,
    # and the tests end well within the second between two looks at the disk: the look after them sees it.
    fill = "open('/tmp/fill', 'wb').write(bytes(60 << 20))"
    env.step(bash(f'echo "{fill}" >> textkit/slug.py'))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "disk_limit") and info["report"]["status"] == "error"
    assert "more than its disk limit of 40 MiB" in info["outcome_detail"]
    assert own_containers(docker_client) == []


@pytest.fixture
def faulty_engine(runtime):
    """An `EngineProxy` in front of the engine (name it before `make_env`, so that the envs are closed while the
    proxy still runs); an env talks to it through `faulty_runtime`."""
    with EngineProxy() as proxy:
        yield proxy


@pytest.fixture
def faulty_runtime(faulty_engine):
    """A `DockerRuntime` of the engine behind `faulty_engine`: pass it to an env as `runtime=`."""
    runtime = DockerRuntime(engine=faulty_engine.url, timeout=60)
    yield runtime
    runtime.close()


def test_the_engine_answering_an_error_to_a_file_tool_ends_the_episode_as_infra(faulty_engine, faulty_runtime, make_env,
                                                                                docker_client):
    env = start(make_env, FIXTURE_IDS[0], runtime=faulty_runtime)
    container = docker_client.api.inspect_container(env.unwrapped.state()["container"])["Id"]
    rule = faulty_engine.fail("GET", f"/containers/{container}/archive", message="injected: the engine is overloaded")
    observation, reward, terminated, truncated, info = env.step({"name": "view_file", "arguments": {"path": "README.md"}})
    assert len(rule.hits) == 1 and (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "engine_error") and "injected: the engine is overloaded" in info["outcome_detail"]
    assert own_containers(docker_client) == []
    env.reset(options={"instance_id": FIXTURE_IDS[0]})
    assert env.step(bash("echo back"))[0] == "back\n[exit code: 0]"


def test_the_engine_refusing_to_create_the_grading_container_ends_as_infra(faulty_engine, faulty_runtime, make_env,
                                                                           docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id, runtime=faulty_runtime)
    # The grading container's start is refused twice: ahead, from the first step, and again at submit.
    rule = faulty_engine.fail("POST", "/containers/create", times=2, message="injected: no space left on device")
    env.step(write_and_apply(task.patch, "gold.patch"))
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert len(rule.hits) == 2 and (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "engine_error") and info["report"]["status"] == "error"
    assert "grading could not run: could not create a container" in info["outcome_detail"]
    assert "injected: no space left on device" in info["outcome_detail"]
    assert own_containers(docker_client) == [], [(c.labels, c.status) for c in own_containers(docker_client)]


def test_a_grading_container_the_engine_refused_ahead_starts_at_submit(faulty_engine, faulty_runtime, make_env,
                                                                       docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id, runtime=faulty_runtime)
    rule = faulty_engine.fail("POST", "/containers/create", message="injected: no space left on device")
    env.step(write_and_apply(task.patch, "gold.patch"))  # starts the grading container ahead: refused
    reward, report = submit(env)
    assert len(rule.hits) == 1 and reward == 1.0 and report["status"] == "resolved"
    assert own_containers(docker_client) == []


def test_a_file_written_past_the_disk_limit_just_before_submit_is_not_graded(make_env, docker_client):
    task = TASKS[FIXTURE_IDS[0]]
    env = start(make_env, task.instance_id, disk_limit="40m")
    env.step(write_and_apply(task.patch, "gold.patch"))
    assert not env.step(bash("head -c 60m /dev/zero > /tmp/fill"))[3]  # ends before the shell's next look at the disk
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert (reward, terminated, truncated) == (0.0, False, True) and not is_trainable(info)
    assert ending(info) == ("infra", "disk_limit") and info["report"]["status"] == "error"
    assert own_containers(docker_client) == []


def swe_env(missing_image: bool = False):
    """A SWE-v0 on the first fixture task; with `missing_image`, its image is a tag no one built (pull off)."""
    env = gym.make("gymenvs/SWE-v0", instance_ids=[FIXTURE_IDS[0]], command_timeout_s=20.0,
                   image_template="gymenvs-missing/{swebench_id}:never-built" if missing_image else None)
    if missing_image:
        swe: Any = env.unwrapped
        swe.tasks = tuple(dataclasses.replace(task, image=None) for task in swe.tasks)
    return env


def test_a_missing_image_fails_the_reset_of_its_slot_only_as_infra(swe_images, docker_client):
    with ConcurrentVectorEnv([swe_env, functools.partial(swe_env, missing_image=True)]) as envs:
        observations, infos = envs.reset(seed=0)
        assert infos["_error"].tolist() == [False, True]
        assert (infos["outcome"][1], infos["outcome_reason"][1]) == ("infra", "image_missing")
        assert "gymenvs-missing/" in infos["error"][1] and "is not present locally" in infos["error"][1]
        assert len(own_containers(docker_client)) == 1  # slot 0's: the failed reset left nothing
        observations, rewards, terminated, truncated, infos = envs.step([bash("echo fine"), None])
        assert observations[0] == "fine\n[exit code: 0]" and not truncated[0]
    assert own_containers(docker_client) == []


def test_the_trl_bridge_replays_the_episode_whose_grading_was_killed(swe_images, runtime, docker_client):
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout = make_rollout_func("gymenvs/SWE-v0", env_kwargs={"instance_ids": [FIXTURE_IDS[0]], "max_turns": 1,
                                                              "command_timeout_s": 5.0},
                                max_tokens_per_turn=8, infra_retries=2)
    try:
        with GradingKiller(runtime) as killer:  # kills the grading of one episode of the two
            episodes = rollout.run(["Fix it."] * 2, generator, tokenizer, seeds=[0, 0], max_completion_length=40)
    finally:
        rollout.close()
    assert len(killer.killed) == 1
    assert rollout.outcome_counts == {"infra_failures": 1, "retries": 1, "dropped": 0}
    assert sorted(episode.retries for episode in episodes) == [0, 1]
    # What reaches TRL is the grading of the agent's work at the turn limit, never the fault's 0.
    assert all(episode.trainable and episode.outcome == "model" for episode in episodes)
    assert [episode.outcome_reason for episode in episodes] == ["turn_limit"] * 2
    assert own_containers(docker_client) == []


def always_resolving_dataset(folder) -> str:
    """textkit-1 with a test that already passes as FAIL_TO_PASS: every episode the model ends is worth 1.0,
    so a 0 among the rewards can only come from a fault."""
    import json

    from gymenvs.swe.tasks import task_to_row

    task = TASKS[FIXTURE_IDS[0]]
    task = dataclasses.replace(task, fail_to_pass=task.pass_to_pass[:1], pass_to_pass=task.pass_to_pass[1:])
    path = folder / "always_resolves.jsonl"
    path.write_text(json.dumps(task_to_row(task), default=str) + "\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_grpo_step_whose_grading_is_killed_trains_on_the_replay_never_on_a_fault_zero(swe_images, runtime, docker_client,
                                                                                        tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    model, tokenizer = tiny_model(seed=0)
    rollout = make_rollout_func("gymenvs/SWE-v0", env_kwargs={"dataset": always_resolving_dataset(tmp_path), "max_turns": 1,
                                                              "command_timeout_s": 5.0},
                                max_tokens_per_turn=8, infra_retries=2)
    args = GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=40, max_steps=1, logging_steps=1, learning_rate=1e-3, seed=0,
                      log_completions=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=episode_dataset(2),
                          rollout_func=rollout, reward_funcs=rollout.reward_func)
    try:
        with GradingKiller(runtime) as killer:  # kills the grading of one episode of the four
            trainer.train()
    finally:
        rollout.close()
    assert len(killer.killed) == 1
    assert list(trainer._logs["rewards"]["env_reward"]) == [1.0] * 4  # the replay's verdict: no 0 from the fault
    (logged,) = [entry for entry in trainer.state.log_history if "infra_failures" in entry]
    assert (logged["infra_failures"], logged["retries"], logged["dropped"]) == (1.0, 1.0, 0.0)
    assert logged["reward"] == 1.0
    assert own_containers(docker_client) == []


def test_the_agent_rollout_replays_the_agent_episode_whose_grading_was_killed(swe_images, runtime, docker_client, tmp_path,
                                                                              caplog):
    """SWEAgent-v0 through `make_rollout_func` (the agent rollout): the episode whose grading the engine killed
    ends `infra` and is replayed from the same seed; both reach TRL with the replay's verdict, no fault's 0."""
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model
    from wrappers.trl.rollout.agent import AgentRollout

    model, tokenizer = tiny_model(seed=0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={"dataset": always_resolving_dataset(tmp_path), "max_turns": 1},
                                max_tokens_per_turn=8, infra_retries=2)
    assert isinstance(rollout, AgentRollout)
    try:
        with GradingKiller(runtime) as killer:  # kills the grading of one episode of the two
            episodes = rollout.run(["Fix it."] * 2, generator, tokenizer, seeds=[0, 0], max_completion_length=200)
    finally:
        rollout.close()
    assert len(killer.killed) == 1
    assert rollout.outcome_counts == {"infra_failures": 1, "retries": 1, "dropped": 0}, caplog.text
    # the replay's warning says why: the grading container the engine killed
    assert "replaying 1 episode(s) that infrastructure or their task ended: infra (container_died)" in caplog.text
    assert sorted(episode.retries for episode in episodes) == [0, 1]
    assert all(episode.trainable and episode.outcome == "model" for episode in episodes)
    assert [episode.reward for episode in episodes] == [1.0, 1.0]  # the task always resolves: a 0 could only be the fault's
    assert own_containers(docker_client) == []


class FaultInOneSlot(gym.Wrapper):
    """SWE-v0 whose first step, in whichever slot takes one first, is replaced by `fault` injected on the real
    engine; that step's ending is kept in `shared["ended"]`. Every other step is the policy's own."""

    def __init__(self, env: gym.Env, fault: str, shared: dict[str, Any]):
        super().__init__(env)
        self.fault, self.shared = fault, shared

    def step(self, action: Any) -> Any:
        with self.shared["lock"]:
            mine, self.shared["armed"] = self.shared["armed"], False
        if not mine:
            return self.env.step(action)
        if self.fault == "engine_error":
            client = self.shared["client"]
            container = client.api.inspect_container(cast(Any, self.env.unwrapped).state()["container"])["Id"]
            self.shared["proxy"].fail("GET", f"/containers/{container}/archive", message="injected: the engine is overloaded")
        result = self.env.step(FAULT_STEPS[self.fault])
        self.shared["ended"] = (result[4].get("outcome"), result[4].get("outcome_reason"))
        return result


FAULT_STEPS = {"oom_killed": bash(f"{MAIN_PROCESS_FIRST}; {FILL_MEMORY}"),
               "disk_limit": bash("head -c 60m /dev/zero > /tmp/fill; sleep 2"),
               "engine_error": {"name": "view_file", "arguments": {"path": "README.md"}}}


@pytest.mark.parametrize("fault", list(FAULT_STEPS))
def test_a_fault_in_one_slot_of_the_bridge_leaves_the_other_graded_and_is_replayed(faulty_engine, faulty_runtime, swe_images,
                                                                                   docker_client, tmp_path, fault):
    """Two episodes of `make_rollout_func` in two slots of its vector env: the fault ends one `infra` with its own
    reason; the other is graded as if nothing happened; the bridge replays the first, and neither reaches TRL as 0."""
    import threading

    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.extras.tiny_model import tiny_model

    shared: dict[str, Any] = {"lock": threading.Lock(), "armed": True, "proxy": faulty_engine, "client": docker_client}
    env_id = f"gymenvs-tests/FaultInOneSlot-{fault}-{os.getpid()}-v0"
    gym.register(env_id, disable_env_checker=True, entry_point=lambda **kwargs: FaultInOneSlot(
        gym.make("gymenvs/SWE-v0", runtime=faulty_runtime, **kwargs), fault, shared))
    model, tokenizer = tiny_model(seed=0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    rollout = make_rollout_func(env_id, env_kwargs={"dataset": always_resolving_dataset(tmp_path), "max_turns": 1,
                                                    "command_timeout_s": 20.0, "mem_limit": "64m", "disk_limit": "40m"},
                                max_tokens_per_turn=8, infra_retries=2)
    try:
        episodes = rollout.run(["Fix it."] * 2, generator, tokenizer, seeds=[0, 0], max_completion_length=40)
    finally:
        rollout.close()
        gym.registry.pop(env_id)
    assert shared["ended"] == ("infra", fault)
    assert rollout.outcome_counts == {"infra_failures": 1, "retries": 1, "dropped": 0}
    assert sorted(episode.retries for episode in episodes) == [0, 1]  # the other slot's episode played once
    # The task always resolves: both graded 1.0, the untouched slot's at once, the faulted one's on its replay.
    assert [(episode.outcome, episode.reward) for episode in episodes] == [("model", 1.0)] * 2
    assert own_containers(docker_client) == []
