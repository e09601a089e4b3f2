"""gymenvs/SWEAgent-v0 (`AgentEnv` of the SWE family) with the reference agent in real containers, driven by a
scripted policy; and `info["request"]`, the `AgentRequest` each observation comes with."""

from __future__ import annotations

import base64
import functools
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from env_support import envs_made
from episode_support import play_all
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.agent.specs import MOUNT
from gymenvs.trajectories import RecordTrajectories, read_trajectories

from .agent_support import NEXT_PROCESS, SUBMIT, TASKS, agent_threads, apply_patch, bash, forgetful_agent, own_containers

pytestmark = pytest.mark.docker


def start(make_agent_env, instance_id: str, **kwargs):
    env = make_agent_env(**kwargs)
    observation, info = env.reset(options={"instance_id": instance_id})
    return env, observation, info


def test_gymnasium_env_checker_passes(make_agent_env):
    from gymnasium.utils.env_checker import check_env

    check_env(make_agent_env(max_turns=3).unwrapped, skip_render_check=True)


#: Episodes played at once by `episodes`: all seven, the three limits (mostly waiting on their timers) with the four
#: gold patches (7 at once measured ~10-11 s on 2 loaded cores, 5 at once 10-14 s, 3 at once 14-16 s).
WORKERS = 7


def play_gold(make, instance_id):
    """The reference agent given a look around (taking 0.3 s), the gold patch (after the policy thought for 0.2 s),
    then submit: the reset and each step, then the episode's trajectory (recorded by `RecordTrajectories`)."""
    with tempfile.TemporaryDirectory() as folder:
        env = RecordTrajectories(make(), folder)
        started = env.reset(options={"instance_id": instance_id})
        looked = env.step(bash("pwd; echo marker-$((6 * 7)); sleep 0.3"))
        time.sleep(0.2)
        applied = env.step(apply_patch(TASKS[instance_id].patch))
        submitted = env.step(SUBMIT)
        return started, looked, applied, submitted, read_trajectories(folder)


def play_step_limit(make):
    """Two replies under a 2-reply step limit: the second step."""
    env, _, _ = start(make, FIXTURE_IDS[0], max_turns=2)
    env.step(bash("true"))
    return env.step(bash("true"))


def play_call_timeout(make):
    """A 30 s command under a 2 s call limit: the step, and how long it took (timed on its own)."""
    env, _, _ = start(make, FIXTURE_IDS[0], call_timeout_s=2.0)
    started = time.monotonic()
    stepped = env.step(bash("sleep 30"))
    return stepped, time.monotonic() - started


def play_wall_clock_limit(make):
    """A 30 s command under an 8 s wall-clock limit: the step."""
    env, _, _ = start(make, FIXTURE_IDS[0], episode_timeout_s=8.0)
    return env.step(bash("sleep 30"))


#: The limits first: they wait longest.
PLAYS = {"step limit": play_step_limit, "call timeout": play_call_timeout, "wall-clock limit": play_wall_clock_limit,
         **{("gold", instance_id): functools.partial(play_gold, instance_id=instance_id) for instance_id in FIXTURE_IDS}}


@pytest.fixture(scope="module")
def episodes(swe_images):
    """The episodes of the gold-patch and limit tests, each played once in its own env (closed when it ends), `WORKERS`
    at a time: by name, what its test asserts on."""

    def episode(play):
        def played():
            with envs_made("gymenvs/SWEAgent-v0", call_timeout_s=60.0) as make:  # as the `make_agent_env` fixture
                return play(make)
        return played

    return play_all({name: episode(play) for name, play in PLAYS.items()}, WORKERS)


def why(info: dict) -> tuple:
    """How an episode's step ended, for an assertion's message."""
    return info.get("outcome"), info.get("outcome_reason"), info.get("error"), (info.get("report") or {}).get("status")


@pytest.mark.parametrize("instance_id", FIXTURE_IDS)
def test_gold_patch_applied_through_the_reference_agent_grades_one(episodes, instance_id):
    task = TASKS[instance_id]
    started, looked, applied, submitted, _ = episodes["gold", instance_id].result()
    observation, info = started
    # The agent's own system prompt and the task reach the policy as the first request.
    assert observation.startswith("[system]\nYou are an autonomous software engineer"), observation[:200]
    assert task.problem_statement.split("\n")[0] in observation
    assert [tool["function"]["name"] for tool in info["tools"]] == ["bash", "submit"]
    assert info["request"]["messages"][0]["role"] == "system"

    observation, reward, terminated, truncated, info = looked
    assert observation.startswith("[tool] (bash)\n/testbed\nmarker-42\n[exit code: 0]"), observation  # ran in the container
    assert not (terminated or truncated) and not info["request"]["history_rewritten"], why(info)

    observation, reward, terminated, truncated, info = applied
    assert "[exit code: 0]" in observation, observation
    observation, reward, terminated, truncated, info = submitted
    assert terminated and not truncated and info["exit_code"] == 0, why(info)
    assert reward == 1.0 and info["report"]["status"] == "resolved", why(info)
    assert (info["outcome"], info["outcome_reason"]) == ("model", "solved")
    assert "reference agent: submitted" in info["agent_log"]
    assert len(info["trajectory"]) == 3
    # Each call records the agent's time to send it and the policy's time to answer it.
    assert 0.3 <= info["trajectory"][1]["agent_seconds"] < 10, info["trajectory"][1]["agent_seconds"]
    assert 0.2 <= info["trajectory"][1]["policy_seconds"] < 10, info["trajectory"][1]["policy_seconds"]


def test_the_episode_as_an_atif_trajectory_holds_the_agents_calls_and_its_grade(episodes):
    (observation, first), *steps, [trajectory] = episodes["gold", FIXTURE_IDS[0]].result()
    info = steps[-1][4]
    assert trajectory.agent.name == first["agent"] and trajectory.agent.tool_definitions == first["tools"]
    assert [step.source for step in trajectory.steps] == ["user", "agent", "agent", "agent"]  # no side calls
    assert trajectory.steps[0].message == observation
    assert [step.observation.results[0].content for step in trajectory.steps[1:]] == [step[0] for step in steps]
    calls = [step.extra["call"] for step in trajectory.steps[1:]]  # each reply annotated with the call it answered
    assert [(call["wire"], call["status"]) for call in calls] == [(entry["wire"], 200) for entry in info["trajectory"]]
    episode = trajectory.extra["gymenvs"]
    assert (episode["reward"], episode["end"], episode["turns"], episode["outcome_reason"]) == (1.0, "terminated", 3, "solved")
    assert episode["patch"] == info["patch"] and episode["report"]["status"] == "resolved"


def test_text_replies_and_json_tool_calls_reach_the_agent(make_agent_env):
    env, _, _ = start(make_agent_env, FIXTURE_IDS[0])
    observation, *_ = env.step("I will look around first.")  # no tool call: the agent says so
    assert "No tool call found" in observation
    observation, *_ = env.step('<tool_call>\n{"name": "bash", "arguments": {"command": "echo tagged"}}\n</tool_call>')
    assert "tagged\n[exit code: 0]" in observation
    observation, *_ = env.step("```bash\necho fenced\n```")
    assert "fenced\n[exit code: 0]" in observation


# -- info["request"]: the AgentRequest each observation comes with ---------------------------------------------------

REQUEST_TYPES = {"messages": list, "tools": list, "new_messages": list, "history_rewritten": bool, "model": str,
                 "sampling": dict, "stream": bool, "wire": str}


def check_request(info: dict) -> dict:
    """`info["request"]`, checked to be an `AgentRequest`: exactly its keys, each of its type; nothing of it left at
    the top level of `info` (the old `info["history_rewritten"]` and `info["wire"]`)."""
    from gymenvs.container.agent.request import AgentRequest

    request = info["request"]
    assert set(request) == set(REQUEST_TYPES) == set(AgentRequest.__annotations__)
    for key, kind in REQUEST_TYPES.items():
        assert isinstance(request[key], kind), (key, request[key])
    assert all(isinstance(message, dict) and "role" in message for message in request["messages"] + request["new_messages"])
    assert "history_rewritten" not in info and "wire" not in info
    return request


def test_the_request_is_an_agent_request_whose_new_messages_are_the_observation(make_agent_env):
    from gymenvs.container.agent.messages import render

    env, observation, info = start(make_agent_env, FIXTURE_IDS[0])
    first = check_request(info)
    # The first request: every message is new.
    assert first["new_messages"] == first["messages"] and not first["history_rewritten"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"] and observation == render(first["messages"])
    assert (first["wire"], first["model"], first["stream"]) == ("chat", "gymenvs-policy", False)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["bash", "submit"] and info["tools"] == first["tools"]

    observation, _, terminated, truncated, info = env.step(bash("echo new-$((6 * 7))"))
    assert not (terminated or truncated)
    second = check_request(info)
    # The next request holds the first one's messages and the reply, then what is new: the tool's result.
    held = len(first["messages"])
    assert second["messages"][:held] == first["messages"] and not second["history_rewritten"]
    (call,) = second["messages"][held]["tool_calls"]
    assert second["messages"][held]["role"] == "assistant" and "new-$((6 * 7))" in call["function"]["arguments"]
    assert second["new_messages"] == second["messages"][held + 1:] and [m["role"] for m in second["new_messages"]] == ["tool"]
    assert observation == render(second["new_messages"]) and observation.startswith("[tool] (bash)\nnew-42\n")
    assert (second["wire"], second["model"], second["tools"]) == (first["wire"], first["model"], first["tools"])


def test_a_rewritten_history_is_new_in_full_and_says_so(make_agent_env):
    """The forgetful agent replaces its conversation with a summary at its third request: that request's messages
    are all new, and `history_rewritten` says so; the request after it extends it again."""
    from gymenvs.container.agent.messages import render

    env, observation, info = start(make_agent_env, FIXTURE_IDS[0], agent=forgetful_agent())
    assert check_request(info)["new_messages"] == info["request"]["messages"]
    observation, *_, info = env.step("First.")
    request = check_request(info)
    assert not request["history_rewritten"] and request["new_messages"] == [{"role": "user", "content": "More."}]

    observation, _, terminated, truncated, info = env.step("Second.")
    assert not (terminated or truncated)
    rewritten = check_request(info)
    summary = [{"role": "system", "content": "You are terse."},
               {"role": "user", "content": "Summary so far: two replies. Say more."}]
    assert rewritten["history_rewritten"] and rewritten["messages"] == summary
    assert rewritten["new_messages"] == rewritten["messages"] and observation == render(summary)

    observation, *_, info = env.step("Third.")
    after = check_request(info)
    assert not after["history_rewritten"] and after["messages"][:2] == summary
    assert after["messages"][2] == {"role": "assistant", "content": "Third."}
    assert after["new_messages"] == [{"role": "user", "content": "More."}] and observation == "[user]\nMore."
    *_, terminated, truncated, info = env.step("Fourth.")
    assert terminated and not truncated and info["exit_code"] == 0, info.get("error")


@pytest.mark.parametrize("action", [42, "<tool_call>{not json}</tool_call>", {"name": 5}],
                         ids=["not an action", "malformed tagged call", "a call without a name"])
def test_a_reply_the_env_cannot_read_leaves_the_same_request_waiting(make_agent_env, action):
    from gymenvs.container.agent.messages import render

    env, _, info = start(make_agent_env, FIXTURE_IDS[0])
    first = info["request"]
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("Invalid action: ") and info["error"] in observation
    assert not (terminated or truncated) and reward == 0.0 and "request" not in info
    assert env.unwrapped.state()["calls"] == 0  # nothing was answered
    # The next step answers that same request: the agent's next one extends it by this reply and its result.
    observation, *_, info = env.step(bash("echo answered"))
    second = check_request(info)
    held = len(first["messages"])
    assert second["messages"][:held] == first["messages"] and len(second["messages"]) == held + 2
    assert "echo answered" in second["messages"][held]["tool_calls"][0]["function"]["arguments"]
    assert observation.startswith("[tool] (bash)\nanswered\n") and observation == render(second["new_messages"])
    assert env.unwrapped.state()["calls"] == 1


def test_the_agent_env_has_no_tools_and_acts_through_act():
    """The agent's reply is no tool call of the env: `AgentEnv` declares no tools (no sentinel names standing for a
    reply or free text) and overrides `TextEnv._act`, leaving `_run` and `_parse_text` as `TextEnv` has them."""
    from gymenvs.container.agent.env import AgentEnv
    from gymenvs.core.env import TextEnv

    assert AgentEnv.tools == {}
    assert "_act" in vars(AgentEnv) and AgentEnv._act is not TextEnv._act
    assert AgentEnv._run is TextEnv._run and AgentEnv._parse_text is TextEnv._parse_text
    env = AgentEnv(family="gymenvs.swe.family:SWEFamily")  # constructing touches no engine
    try:
        assert env.tools == {} and env.tool_schemas() == []
    finally:
        env.close()


def test_the_agent_cannot_read_the_grading_data(make_agent_env):
    task = TASKS[FIXTURE_IDS[0]]
    env, _, _ = start(make_agent_env, task.instance_id)
    secrets = [*task.fail_to_pass,
               *(line[1:].strip() for line in task.test_patch.splitlines() if line.startswith("+") and len(line) > 20),
               *(line[1:].strip() for line in task.patch.splitlines() if line.startswith("+ ") and len(line) > 20)]
    assert len(secrets) > 4
    # base64 on the command line, so that the search command itself does not hold the secrets
    encoded = base64.b64encode("\n".join(sorted(set(secrets))).encode()).decode()
    search = (f"echo {encoded} | base64 -d > /tmp/patterns; "
              "grep -rFl -f /tmp/patterns / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null "
              "| grep -v '^/tmp/patterns$'; "
              "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -F -f /tmp/patterns; echo searched")
    observation, *_ = env.step(bash(search))
    assert observation.startswith("[tool] (bash)\nsearched\n"), observation


def test_the_agent_reaches_its_channel_on_its_own_loopback_with_nothing_relaying_in_its_container(make_agent_env):
    """On an engine of this host the channel listens in the container's network namespace: no forwarder runs, and the
    agent's connection is to a socket of the env's process (tests/container/runtime/test_remote_engine.py has the
    forwarder, where that cannot be)."""
    env, _, _ = start(make_agent_env, FIXTURE_IDS[0])
    processes = "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
    endpoint = "echo port=${GYMENVS_ORIGIN##*:} pid=$GYMENVS_FORWARDER_PID"
    observation, *_ = env.step(bash(f"{processes}; ls -A {MOUNT}; echo; {endpoint}"))
    assert "reference_agent.py" in observation and "forwarder" not in observation, observation
    assert " pid=\n" in observation, observation  # no forwarder pid
    port = int(observation.rsplit("port=", 1)[1].split()[0])
    listener = env.unwrapped._endpoint.listener
    assert listener is not None and listener.getsockname() == ("127.0.0.1", port)


MALFORMED = {
    "a body that is not JSON": ("b'{oops'", "not JSON"),
    "a wrong key": ("json.dumps({'messages': [{'role': 'user', 'content': 'x'}]}).encode()", "API key"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_request_from_inside_ends_the_episode_with_a_clear_error(make_agent_env, case):
    body, words = MALFORMED[case]
    key = "'wrong'" if "key" in case else "os.environ['OPENAI_API_KEY']"
    script = (f"import json, os, urllib.request as u; r = u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', "
              f"data={body}, headers={{'Authorization': 'Bearer ' + {key}}}); u.urlopen(r)")
    env, _, _ = start(make_agent_env, FIXTURE_IDS[0])
    observation, reward, terminated, truncated, info = env.step(bash(f'python3 -c "{script}"'))
    assert truncated and not terminated and words in info["error"], info.get("error")
    assert (info["outcome"], info["outcome_reason"]) == ("model", "protocol_error")
    assert info["report"]["status"] == "unresolved"  # the work so far is still graded


def test_a_step_limit_ends_the_episode_truncated_with_an_error(episodes):
    *_, terminated, truncated, info = episodes["step limit"].result()
    assert truncated and not terminated and "step limit (2 replies)" in info["error"], why(info)
    assert (info["outcome"], info["outcome_reason"]) == ("model", "turn_limit")


def test_a_call_timeout_ends_the_episode_truncated_with_an_error(episodes):
    (*_, truncated, info), seconds = episodes["call timeout"].result()
    assert truncated and "no request within the call limit (2 s)" in info["error"], why(info)
    assert (info["outcome"], info["outcome_reason"]) == ("model", "time_limit")
    assert seconds < 25


def test_a_wall_clock_limit_ends_the_episode_truncated_with_an_error(episodes):
    *_, truncated, info = episodes["wall-clock limit"].result()
    assert truncated and "wall-clock limit (8 s)" in info["error"], why(info)


ROOT_ONLY = "\nimport os as _gymenvs_os\nassert _gymenvs_os.geteuid() == 0, 'this module needs root'\n"


@pytest.mark.parametrize("grade_as_root", [True, False])
def test_grade_as_root_decides_who_runs_the_tests(make_agent_env, grade_as_root):
    task = TASKS[FIXTURE_IDS[0]]
    module = next(line.split(" b/")[-1] for line in task.patch.splitlines() if line.startswith("diff --git"))
    env, _, _ = start(make_agent_env, task.instance_id, grade_as_root=grade_as_root)
    env.step(apply_patch(task.patch))
    observation, *_ = env.step(bash(f"printf %s {shlex.quote(ROOT_ONLY)} >> {module} && echo appended"))
    assert "appended\n[exit code: 0]" in observation
    *_, info = env.step(SUBMIT)
    # the gold patch, plus a module that imports only as root: resolved exactly when the tests run as root
    assert (info["report"]["status"] == "resolved") == grade_as_root, info["report"]
    assert "needs root" not in info["report"]["log_tail"] if grade_as_root else "needs root" in info["report"]["log_tail"]


@pytest.mark.parametrize("network", [True, False])
def test_network_gives_the_agents_container_an_interface_and_grading_still_works(make_agent_env, network):
    task = TASKS[FIXTURE_IDS[1]]
    env, _, _ = start(make_agent_env, task.instance_id, network=network)
    observation, *_ = env.step(bash("ls /sys/class/net"))
    assert ("eth0" in observation.split()) == network, observation
    env.step(apply_patch(task.patch))
    *_, info = env.step(SUBMIT)
    assert info["report"]["status"] == "resolved"


def test_an_agent_that_fills_the_disk_is_stopped(make_agent_env, docker_client):
    env, _, _ = start(make_agent_env, FIXTURE_IDS[0], disk_limit="100m")
    observation, reward, terminated, truncated, info = env.step(bash("head -c 300M /dev/zero > /tmp/blob; echo written"))
    if env.unwrapped.limits.disk_limit and getattr(env.unwrapped._sandbox, "disk_capped", False):
        # the engine caps the writable layer itself: the write fails and the episode goes on
        assert "No space left on device" in observation and not (terminated or truncated)
        return
    for _ in range(3):  # the watch looks about once a second, in the background: one of the next turns ends it
        if truncated:
            break
        time.sleep(0.5)
        observation, reward, terminated, truncated, info = env.step(bash("true"))
    assert truncated and not terminated and reward == 0.0
    assert "more than its disk limit of 100 MiB" in info["error"]
    assert (info["outcome"], info["outcome_reason"]) == ("infra", "disk_limit")
    assert info["report"]["status"] == "unresolved" and not own_containers(docker_client)


def test_nothing_is_left_after_close_or_a_failed_reset(make_agent_env, docker_client):
    from gymenvs.container.agent.specs import AgentSpec

    env, _, _ = start(make_agent_env, FIXTURE_IDS[0])
    directory = env.unwrapped._channel.directory
    assert own_containers(docker_client) and directory.exists() and agent_threads()
    env.close()
    assert not own_containers(docker_client) and not directory.exists() and not agent_threads()

    broken = make_agent_env(agent=AgentSpec("broken", command="echo starting; exit 7"))
    with pytest.raises(RuntimeError, match="(?s)made no LLM request.*exited with code 7.*starting"):
        broken.reset()
    assert not own_containers(docker_client) and not agent_threads()
    pid = str(__import__("os").getpid())
    assert not [p for p in Path(tempfile.gettempdir()).glob("gymenvs-agent-*") if str(p).split("-")[2] == pid]


def test_a_sigkilled_process_leaves_nothing_the_next_process_does_not_reap(swe_images, docker_client):
    script = ("import gymnasium as gym, gymenvs, json, os, signal\n"
              "env = gym.make('gymenvs/SWEAgent-v0'); env.reset(seed=0)\n"
              "print(json.dumps([env.unwrapped._sandbox.name, str(env.unwrapped._channel.directory)]), flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    container, directory = json.loads(result.stdout)
    result = subprocess.run([sys.executable, "-c", NEXT_PROCESS], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    # Another test process's first reset may reap them first (the engine's tests run on two workers): what counts is
    # that once the next process has reset, nothing the killed one left is there.
    assert not docker_client.containers.list(all=True, filters={"name": container}) and not Path(directory).exists()


def test_sixteen_agents_in_a_vector_env_without_cross_talk(swe_images, docker_client):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    envs = gym.make_vec("gymenvs/SWEAgent-v0", num_envs=16, backend="thread", call_timeout_s=120.0)
    try:
        observations, infos = envs.reset(seed=list(range(16)))
        assert all(o.startswith("[system]") for o in observations)
        for round_ in range(2):
            actions = [bash(f"echo slot-{i}-round-{round_}") for i in range(16)]
            observations, rewards, terminated, truncated, infos = envs.step(actions)
            assert not terminated.any() and not truncated.any()
            for i, observation in enumerate(observations):
                assert observation.startswith(f"[tool] (bash)\nslot-{i}-round-{round_}\n[exit code: 0]"), (i, observation)
    finally:
        envs.close()
    assert not own_containers(docker_client) and not agent_threads()


def test_the_documented_quick_start_runs(swe_images, capsys):
    docs = Path(__file__).resolve().parents[3] / "docs" / "swe-agents.md"
    block = docs.read_text().split("```python\n")[1].split("```")[0]
    exec(compile(block, str(docs), "exec"), {"__name__": "documented_example"})
    assert capsys.readouterr().out.endswith("1.0 resolved\n")
