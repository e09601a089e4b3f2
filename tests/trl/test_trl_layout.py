"""The TRL bridge's layout: the packages export their modules' public names, and a rollout asks the
env's class (`hosts_agent`), not a list of ids, whether it is an agent env."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gymenvs  # noqa: F401  (registers the envs)
import wrappers.trl
from gymenvs.envs.echo import EchoEnv
from wrappers.trl.rollout.agent import AgentRollout
from wrappers.trl.rollout.base import EnvRollout
from wrappers.trl.rollout.env import rollout_class_for


def test_the_rollout_package_exports_its_modules_names() -> None:
    import wrappers.trl.rollout as rollout

    assert rollout.EnvRollout is EnvRollout and rollout.make_rollout_func is wrappers.trl.make_rollout_func
    assert {"env_reward", "Prompt", "RolloutEnv", "EnvSpec", "ENVIRONMENT_COLUMN", "evaluate_rollouts"} <= set(dir(rollout))


def test_the_generation_package_exports_every_backend() -> None:
    import wrappers.trl.generation as generation

    for name in ("Completion", "Sampling", "Generator", "TransformersGenerator", "VLLMGenerator", "VLLMServerGenerator",
                 "VLLMClientGenerator", "MissingLogprobError", "generator_from_trainer"):
        assert getattr(generation, name) is not None


def test_every_public_name_resolves() -> None:
    for name in wrappers.trl.__all__:
        assert getattr(wrappers.trl, name) is not None


def test_evaluate_rollouts_of_an_unknown_id_is_a_value_error_before_anything_is_built() -> None:
    with pytest.raises(ValueError, match="not registered"):
        wrappers.trl.evaluate_rollouts("no/Such-v0", None, None, num_episodes=1)


class HostedAgentEcho(EchoEnv):
    hosts_agent = True


def test_the_rollout_class_comes_from_the_env_class_not_its_id() -> None:
    gym.register("test/HostedAgentEcho-v0", entry_point=HostedAgentEcho)
    try:
        assert rollout_class_for("test/HostedAgentEcho-v0") is AgentRollout
    finally:
        del gym.registry["test/HostedAgentEcho-v0"]
    assert rollout_class_for("gymenvs/SWEAgent-v0") is AgentRollout
    assert rollout_class_for("gymenvs/Echo-v0") is EnvRollout
    assert rollout_class_for(["gymenvs/Echo-v0", "gymenvs/Wordle-v0"]) is EnvRollout
