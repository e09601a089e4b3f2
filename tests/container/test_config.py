"""The options of the container envs, checked at construction (no Docker engine needed): the family's (`SWEOptions`:
which tasks, the container limits, grading) and the env's own (`ContainerConfig`, `AgentConfig`), as SWE-v0 and
SWEAgent-v0 take them."""

from __future__ import annotations

from functools import partial

import pytest
from swe.swe_support import FIXTURE_IDS

from gymenvs.container.agent.env import AgentEnv
from gymenvs.container.agent.options import AgentConfig
from gymenvs.container.config import ContainerConfig
from gymenvs.container.runtime import Limits
from gymenvs.container.tools_env import ToolsEnv
from gymenvs.core.errors import ConfigError
from gymenvs.swe.family import SWEFamily

#: SWE-v0 and SWEAgent-v0 as registered: each env class with the SWE family named by its class.
ENVS = {"ToolsEnv": partial(ToolsEnv, SWEFamily), "AgentEnv": partial(AgentEnv, SWEFamily)}

BAD_SHARED_VALUES = [
    ("dataset", 3),
    ("split", ["test"]),
    ("instance_ids", "one-id"),
    ("instance_ids", ["not-a-task"]),
    ("image_template", "x/{oops}"),
    ("pull", "yes"),
    ("registry", "http://127.0.0.1:5000"),
    ("registry", "127.0.0.1:5000/Upper"),
    ("mem_limit", "2 GB"),
    ("mem_limit", "2gb"),
    ("cpus", 0),
    ("pids_limit", True),
    ("pids_limit", 0),
    ("disk_limit", "ten gigs"),
    ("network", 1),
    ("output_limit", 100),
    ("output_limit", 2 << 20),
    ("warm_pool", -1),
    ("command_timeout_s", 0),
    ("command_timeout_s", "60"),
    ("grading_timeout_s", -5.0),
    ("grade_as_root", "no"),
    ("unenforced_limits", "ignore"),
    ("no_such_option", 1),
]


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize(("name", "value"), BAD_SHARED_VALUES)
def test_each_bad_shared_value_is_a_value_error_naming_it(env, name, value):
    with pytest.raises(ValueError) as raised:
        ENVS[env](**{name: value})
    message = str(raised.value)
    assert name in message and repr(value).strip("'") in message


@pytest.mark.parametrize(("name", "value", "allowed"), [
    ("agent", "claude", "known agents are ['claude-code', 'codex', 'mini-swe-agent', 'opencode', 'pi', 'reference']"),
    ("mode", "white-box", "'interception' or 'black-box'"),
    ("upstream_url", "http://upstream:8000/v1", "interception mode takes none"),
    ("call_timeout_s", 0, "greater than 0"),
    ("episode_timeout_s", -1, "greater than 0"),
])
def test_each_bad_agent_value_is_a_value_error_naming_value_and_allowed(name, value, allowed):
    with pytest.raises(ValueError) as raised:
        AgentEnv(SWEFamily, **{name: value})
    message = str(raised.value)
    assert name in message and str(value) in message and allowed in message


def test_sizes_have_one_pattern_and_are_read_as_bytes():
    task = SWEFamily().load_tasks()[0]
    limits = SWEFamily(mem_limit="512m", disk_limit="3G").limits(task)
    assert limits.mem_limit == "512m" and limits.disk_limit == 3 << 30
    assert SWEFamily(disk_limit="1024").limits(task).disk_limit == 1024
    with pytest.raises(ValueError, match="disk_limit"):
        SWEFamily(disk_limit="3 G")


SHARED = dict(instance_ids=FIXTURE_IDS[1:3], mem_limit="1g", cpus=0.5, pids_limit=256, disk_limit="2g", network=True,
              output_limit=4096, command_timeout_s=7.0, grading_timeout_s=90.0, grade_as_root=True, warm_pool=3)


def test_both_envs_split_the_same_keywords_between_the_family_and_their_own_config():
    tools_env, agent_env = ToolsEnv(SWEFamily, **SHARED), AgentEnv(SWEFamily, agent="reference", **SHARED)
    for env in (tools_env, agent_env):
        assert [task.instance_id for task in env.tasks] == FIXTURE_IDS[1:3]
        assert all(env.family.limits(task) == Limits(mem_limit="1g", cpus=0.5, network=True, disk_limit=2 << 30)
                   for task in env.tasks)
        assert env.config.pids_limit == 256  # the env's: it caps every container of every family
        assert env.family.options.test_user is None  # grade_as_root
        assert env.config.command_timeout_s == 7.0 and env.family.options.grading_timeout_s == 90.0
        assert env.config.warm_pool == 3 and env.config.output_limit == 4096
    assert type(tools_env.config) is ContainerConfig and isinstance(agent_env.config, AgentConfig)
    assert agent_env.config.model_dump(include=set(ContainerConfig.model_fields)) == tools_env.config.model_dump()
    assert agent_env.family.options == tools_env.family.options


def test_both_envs_run_one_family_object_and_take_only_their_own_options_beside_it():
    family = SWEFamily(instance_ids=FIXTURE_IDS[1:3], mem_limit="1g", grading_timeout_s=90.0)
    tools_env, agent_env = ToolsEnv(family=family, command_timeout_s=9.0), AgentEnv(family=family, warm_pool=2)
    assert tools_env.family is family and agent_env.family is family
    assert tools_env.config.command_timeout_s == 9.0 and agent_env.config.warm_pool == 2
    assert [task.instance_id for task in agent_env.tasks] == FIXTURE_IDS[1:3]
    with pytest.raises(ConfigError, match=r"cpus beside family=SWEFamily\(.*mem_limit='1g'"):
        AgentEnv(family=family, cpus=-1.0)  # the family holds its options: give them to it
    with pytest.raises(ValueError, match=r"family=\{'mem_limit': '1g'\}: allowed is a TaskFamily"):
        ToolsEnv({"mem_limit": "1g"})


def test_the_config_argument_is_gone_and_is_an_unknown_argument():
    for env in ENVS:
        with pytest.raises(ConfigError, match=rf"^{env}\(family=SWEFamily\) got an unknown argument config="):
            ENVS[env](config=ContainerConfig(command_timeout_s=7.0))


def test_an_agent_spec_as_agent_builds_the_agent_env():
    from gymenvs.container.agent.specs import AgentSpec

    spec = AgentSpec("mine", command="exec true")
    env = AgentEnv(SWEFamily, agent=spec, call_timeout_s=5.0, mem_limit="1g", episode_timeout_s=9.0)
    assert env.agent is spec and env.config.call_timeout_s == 5.0 and env.config.episode_timeout_s == 9.0
    assert env.family.options.mem_limit == "1g"
    with pytest.raises(ValueError, match="agent"):
        ToolsEnv(SWEFamily, agent=spec)  # SWE-v0 has no agent option


@pytest.mark.parametrize(("env", "old", "new"), [
    ("ToolsEnv", "command_timeout", "command_timeout_s"),
    ("ToolsEnv", "grading_timeout", "grading_timeout_s"),
    ("AgentEnv", "call_timeout", "call_timeout_s"),
    ("AgentEnv", "episode_timeout", "episode_timeout_s"),
])
def test_a_timeout_without_its_unit_is_an_unknown_argument_that_names_the_right_one(env, old, new):
    with pytest.raises(ConfigError, match=rf"^{env}\(family=SWEFamily\) got an unknown argument {old}=42.0 "
                                          rf"\(did you mean '{new}'\?\)\. Accepted: "):
        ENVS[env](**{old: 42.0})


def test_unknown_instance_id_at_reset_is_one_message_for_both_envs():
    for make in ENVS.values():
        with pytest.raises(ValueError, match=r"instance_id='nope' is not a task of this env \(4 tasks: "):
            make().reset(options={"instance_id": "nope"})
