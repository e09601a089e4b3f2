"""The warm pool starts an agent CLI ahead of its task (Codex, the fastest to start; OpenCode, started ahead as its own
server, for the first test), against the real Docker engine: the episode's agent was already running before `reset`
and grades as before; it reaches no channel before `reset`; a pooled container's token opens no other episode's
channel; closing the env leaves nothing running."""

from __future__ import annotations

import json
import time

import pytest

from gymenvs.container.agent.specs import MOUNT
from gymenvs.container.runtime.docker.sandbox import DockerSandbox

from .agent_support import TASKS, own_containers
from .cli_support import CLIS, gold_patch_call

pytestmark = pytest.mark.docker

AGENT = "codex"
INSTANCE_ID = sorted(TASKS)[0]
#: How each agent's binary's path ends (the process `AGENT_PROBE` looks for): OpenCode's is its server.
BINARIES = {"codex": "/codex", "opencode": "/opencode"}
#: Prints, as JSON, the pid of the agent's binary (its path ending with sys.argv[1]) in the container, its start
#: (seconds since the epoch) and the endpoint and token it was started with.
AGENT_PROBE = r"""
import json, os, sys
boot = next(float(l.split()[1]) for l in open('/proc/stat') if l.startswith('btime'))
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
        if argv[0].endswith(sys.argv[1].encode()):
            ticks = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[19])
            environ = dict(e.split('=', 1) for e in open(f'/proc/{pid}/environ').read().split('\0') if '=' in e)
            print(json.dumps({'pid': int(pid), 'started': boot + ticks / os.sysconf('SC_CLK_TCK'),
                              'key': environ['OPENAI_API_KEY'], 'base_url': environ['OPENAI_BASE_URL']}))
    except (OSError, ValueError):
        pass
"""
#: A request to the agent's endpoint from inside its container, as the agent sends one: its HTTP status, or "closed"
#: when the connection ends without a reply.
REQUEST_PROBE = r"""
import sys, urllib.request, urllib.error
request = urllib.request.Request(sys.argv[1] + '/models', headers={'Authorization': 'Bearer ' + sys.argv[2]})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as error:
    print(error.code)
except OSError:
    print('closed')
"""


@pytest.fixture(scope="module")
def agent_images(swe_images, runtime):
    """Codex's and OpenCode's derived images of the task's image (built by .ci/setup --agents; here if missing)."""
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec
    from gymenvs.swe.images import image_for

    for agent in BINARIES:
        install_agent(runtime, agent_spec(agent), [image_for(TASKS[INSTANCE_ID])], progress=False)


def env_with_pool(make_agent_env, agent: str):
    """A SWEAgent-v0 of `agent` with a warm pool of 2, after one short episode (which made the pool): its pooled
    containers, each running its agent."""
    env = make_agent_env(agent=agent, instance_ids=[INSTANCE_ID], warm_pool=2, max_turns=10)
    env.reset(options={"instance_id": INSTANCE_ID})
    env.step("Nothing to do.")
    return env


@pytest.fixture
def pooled_env(make_agent_env, agent_images):
    return env_with_pool(make_agent_env, AGENT)


def pooled_agents(docker_client, agent: str = AGENT, count: int = 2) -> dict[str, dict]:
    """This process's pooled containers, once `count` of them run their agent: container id -> `AGENT_PROBE`."""
    deadline = time.monotonic() + 120
    while True:
        pooled = [c for c in own_containers(docker_client) if c.labels.get("gymenvs.container.pool") == "1"]
        agents = {c.id: agent_in(c, agent) for c in pooled}
        if len(pooled) == count and all(agents.values()):
            return agents
        assert time.monotonic() < deadline, f"the pool did not start its agents: {agents}"
        time.sleep(0.2)


def agent_in(container, agent: str = AGENT) -> dict | None:
    output = container.exec_run(["python3", "-c", AGENT_PROBE, BINARIES[agent]]).output.decode().strip()
    return json.loads(output) if output else None


def request_from(docker_client, container_id: str, base_url: str, token: str) -> str:
    command = ["python3", "-c", REQUEST_PROBE, base_url, token]
    return docker_client.containers.get(container_id).exec_run(command).output.decode().strip()


@pytest.mark.parametrize("agent", sorted(BINARIES))
def test_a_pooled_agent_runs_before_reset_and_its_episode_grades_one(make_agent_env, agent_images, docker_client, agent,
                                                                    monkeypatch):
    pooled_env = env_with_pool(make_agent_env, agent)
    agents = pooled_agents(docker_client, agent)
    written: list[str] = []  # the containers the engine wrote into (the pool's refill, started by reset, too)
    real_put_archive = DockerSandbox.put_archive
    monkeypatch.setattr(DockerSandbox, "put_archive", lambda sandbox, directory, archive: (
        written.append(sandbox.id), real_put_archive(sandbox, directory, archive))[1])
    before_reset = time.time()
    observation, info = pooled_env.reset(options={"instance_id": INSTANCE_ID})
    monkeypatch.undo()
    container = pooled_env.unwrapped.state()["container"]
    assert docker_client.containers.get(container).id not in written  # the task file came with the task
    task_file = docker_client.containers.get(container).exec_run(["cat", f"{MOUNT}/task.md"]).output.decode()
    assert task_file == TASKS[INSTANCE_ID].problem_statement
    started_ahead = agents[docker_client.containers.get(container).id]
    assert started_ahead["started"] < before_reset  # the agent of the episode was started ahead, by the pool
    serving = agent_in(docker_client.containers.get(container), agent)
    assert serving["pid"] == started_ahead["pid"]  # and it is the one serving
    assert CLIS[agent].system_prompt in observation
    assert TASKS[INSTANCE_ID].problem_statement.split("\n")[0] in observation
    assert pooled_env.unwrapped.trajectory == []  # its clock starts at reset: no call was made before
    pooled_env.step(gold_patch_call(CLIS[agent], INSTANCE_ID))
    _, reward, terminated, _, info = pooled_env.step("The issue is fixed.")
    assert terminated and info["exit_code"] == 0, info.get("error")
    assert reward == 1.0 and info["report"]["status"] == "resolved"


def test_an_agent_started_ahead_reaches_no_channel_and_its_token_opens_no_other_episode(pooled_env, docker_client):
    agents = pooled_agents(docker_client)
    for container, agent in agents.items():  # before any episode takes it: refused, whatever the token
        assert request_from(docker_client, container, agent["base_url"], agent["key"]) == "closed"
    pooled_env.reset(options={"instance_id": INSTANCE_ID})
    episode = pooled_env.unwrapped.state()["container"]
    episode_id = docker_client.containers.get(episode).id
    mine = agents[episode_id]
    assert request_from(docker_client, episode_id, mine["base_url"], mine["key"]) == "200"  # the episode's own token
    (other,) = [agent for container, agent in agents.items() if container != episode_id]
    assert other["key"] != mine["key"]  # a token per container
    assert request_from(docker_client, episode_id, mine["base_url"], other["key"]) == "401"


def test_closing_the_env_with_agents_started_ahead_leaves_nothing(pooled_env, docker_client):
    pooled_agents(docker_client)
    pooled_env.reset(options={"instance_id": INSTANCE_ID})
    pooled_env.close()
    assert own_containers(docker_client) == []
