"""SWEConfig: the options SWE-v0 and SWEAgent-v0 share, checked at construction (no Docker engine needed)."""

from __future__ import annotations

import pytest

from gymenvs.core.errors import ConfigError
from gymenvs.container.agent.env import SWEAgentConfig, SWEAgentEnv
from gymenvs.swe.base import SWEConfig
from gymenvs.swe.env import SWEEnv

from swe.swe_support import FIXTURE_IDS

BAD_SHARED_VALUES = [
    ("dataset", 3),
    ("split", ["test"]),
    ("instance_ids", "one-id"),
    ("instance_ids", ["not-a-task"]),
    ("image_template", "x/{oops}"),
    ("pull", "yes"),
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
    ("no_such_option", 1),
]


@pytest.mark.parametrize("env_class", [SWEEnv, SWEAgentEnv])
@pytest.mark.parametrize(("name", "value"), BAD_SHARED_VALUES)
def test_each_bad_shared_value_is_a_value_error_naming_it(env_class, name, value):
    with pytest.raises(ValueError) as raised:
        env_class(**{name: value})
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
        SWEAgentEnv(**{name: value})
    message = str(raised.value)
    assert name in message and str(value) in message and allowed in message


def test_sizes_have_one_pattern_and_are_read_by_docker_utils():
    config = SWEConfig(mem_limit="512m", disk_limit="3G")
    assert config.limits.mem_limit == "512m" and config.limits.disk_limit == 3 << 30
    assert SWEConfig(disk_limit="1024").limits.disk_limit == 1024
    with pytest.raises(ValueError, match="disk_limit"):
        SWEConfig(disk_limit="3 G")


def test_both_envs_are_built_from_the_same_config():
    config = SWEConfig(instance_ids=FIXTURE_IDS[1:3], mem_limit="1g", cpus=0.5, pids_limit=256, disk_limit="2g",
                       network=True, output_limit=4096, command_timeout_s=7.0, grading_timeout_s=90.0, grade_as_root=True,
                       warm_pool=3)
    tools_env, agent_env = SWEEnv(config), SWEAgentEnv(config, agent="reference")
    for env in (tools_env, agent_env):
        assert [task.instance_id for task in env.tasks] == FIXTURE_IDS[1:3]
        assert env.limits == config.limits
        assert env.limits.network and env.limits.disk_limit == 2 << 30
        assert env.config.test_user is None  # grade_as_root
        assert env.config.command_timeout_s == 7.0 and env.config.grading_timeout_s == 90.0
        assert env.config.warm_pool == 3
    assert isinstance(agent_env.config, SWEAgentConfig)
    assert agent_env.config.model_dump(include=set(SWEConfig.model_fields)) == config.model_dump()


def test_an_agent_config_with_an_agent_spec_builds_the_agent_env():
    from gymenvs.container.agent.specs import AgentSpec

    spec = AgentSpec("mine", command="exec true")
    config = SWEAgentConfig(agent=spec, call_timeout_s=5.0, mem_limit="1g")
    env = SWEAgentEnv(config, episode_timeout_s=9.0)
    assert env.agent is spec and env.config.call_timeout_s == 5.0 and env.config.episode_timeout_s == 9.0
    with pytest.raises(ValueError, match="agent"):
        SWEEnv(config)  # SWE-v0 has no agent option


def test_keyword_arguments_override_the_config_and_are_checked_the_same():
    config = SWEConfig(mem_limit="1g", command_timeout_s=7.0)
    env = SWEEnv(config, command_timeout_s=9.0)
    assert env.config.mem_limit == "1g" and env.config.command_timeout_s == 9.0
    assert config.command_timeout_s == 7.0  # the caller's config is not changed
    with pytest.raises(ValueError, match="cpus"):
        SWEAgentEnv(config, cpus=-1.0)
    with pytest.raises(ValueError, match="config="):
        SWEEnv({"mem_limit": "1g"})


@pytest.mark.parametrize(("env_class", "old", "new"), [
    (SWEEnv, "command_timeout", "command_timeout_s"),
    (SWEEnv, "grading_timeout", "grading_timeout_s"),
    (SWEAgentEnv, "call_timeout", "call_timeout_s"),
    (SWEAgentEnv, "episode_timeout", "episode_timeout_s"),
])
def test_a_timeout_without_its_unit_is_an_unknown_argument_that_names_the_right_one(env_class, old, new):
    with pytest.raises(ConfigError, match=rf"^{env_class.__name__} got an unknown argument {old}=42.0 "
                                          rf"\(did you mean '{new}'\?\)\. Accepted: "):
        env_class(**{old: 42.0})


def test_unknown_instance_id_at_reset_is_one_message_for_both_envs():
    for env in (SWEEnv(), SWEAgentEnv()):
        with pytest.raises(ValueError, match=r"instance_id='nope' is not a task of this env \(4 tasks: "):
            env.reset(options={"instance_id": "nope"})
