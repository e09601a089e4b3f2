"""The properties every registered env has (tests/core/test_env_properties.py), on SWE-v0 with a real engine:
arbitrary actions never crash it or leave the observation space, and the same seed gives the same task."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.action_support import play_arbitrary_actions

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(swe_images):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    env = gym.make("gymenvs/SWE-v0", command_timeout_s=5.0, max_turns=4)
    yield env
    env.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), data=st.data())
def test_arbitrary_actions_never_crash_or_leave_the_space(env, seed, data):
    for _, _, _, truncated, info in play_arbitrary_actions(env, seed, data, max_steps=3):
        if truncated:  # only by the turn limit: nothing the agent sends breaks the sandbox
            assert info.get("truncated_reason") == "turn_limit", info.get("error")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_same_seed_same_task_and_first_observation(env, seed):
    first, info = env.reset(seed=seed)
    again, info_again = env.reset(seed=seed)
    assert (first, info["instance_id"]) == (again, info_again["instance_id"])
