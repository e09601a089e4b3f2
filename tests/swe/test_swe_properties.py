"""The properties every registered env has (tests/test_env_properties.py), on SWE-v0 with a real engine:
arbitrary actions never crash it or leave the observation space, and the same seed gives the same task."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from action_strategies import actions

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(swe_images):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    env = gym.make("gymenvs/SWE-v0", command_timeout=5.0, max_turns=4)
    yield env
    env.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_arbitrary_actions_never_crash_or_leave_the_space(env, seed, data):
    observation, info = env.reset(seed=seed)
    assert observation in env.observation_space
    tool_names = [schema["function"]["name"] for schema in info["tools"]]
    for _ in range(data.draw(st.integers(1, 3))):
        observation, reward, terminated, truncated, info = env.step(data.draw(actions(tool_names)))
        assert observation in env.observation_space
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        if truncated:  # only by the turn limit: nothing the agent sends breaks the sandbox
            assert info.get("truncated_reason") == "turn_limit", info.get("error")
        json.dumps(env.unwrapped.state())
        if terminated or truncated:
            break


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_same_seed_same_task_and_first_observation(env, seed):
    first, info = env.reset(seed=seed)
    again, info_again = env.reset(seed=seed)
    assert (first, info["instance_id"]) == (again, info_again["instance_id"])
