"""mini-swe-agent 2.4.6, installed offline into derived fixture images, driven through SWEAgent-v0: on a fixture
repository and on the real upstream release (the other fixture tasks add nothing about the agent)."""

from __future__ import annotations

import pytest
from swe.swe_support import FIXTURE_IDS

from .agent_support import TASKS, apply_patch, bash

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@pytest.fixture(scope="module")
def mini_images(swe_images, runtime):
    """The derived images (built by .ci/setup; built here if missing, which takes minutes)."""
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import MINI_SWE_AGENT
    from gymenvs.swe.images import image_for

    install_agent(runtime, MINI_SWE_AGENT, [image_for(task) for task in TASKS.values()], progress=False)


@pytest.mark.parametrize("instance_id", [FIXTURE_IDS[0], next(i for i in FIXTURE_IDS if "upstream" in i)])
def test_gold_patch_applied_through_mini_swe_agent_grades_one(mini_images, instance_id):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    task = TASKS[instance_id]
    env = gym.make("gymenvs/SWEAgent-v0", agent="mini-swe-agent", call_timeout_s=120.0)
    try:
        observation, info = env.reset(options={"instance_id": instance_id})
        assert info["image"].endswith(":latest-mini-swe-agent-2.4.6")
        # mini-swe-agent's own prompts and its single bash tool
        assert observation.startswith("[system]\nYou are a helpful assistant that can interact with a computer.")
        assert "Please solve this issue: " + task.problem_statement.split("\n")[0] in observation
        assert [tool["function"]["name"] for tool in info["tools"]] == ["bash"]

        observation, reward, terminated, truncated, info = env.step(bash("pwd && echo marker-$((6 * 7))"))
        assert '"output": "/testbed\\nmarker-42\\n"' in observation and not info["request"]["history_rewritten"]
        observation, reward, terminated, truncated, info = env.step(apply_patch(task.patch))
        assert '"returncode": 0' in observation and not (terminated or truncated)
        observation, reward, terminated, truncated, info = env.step(bash(SUBMIT_COMMAND))
        assert terminated and not truncated and info["exit_code"] == 0, (info.get("error"), info["agent_log"][-2000:])
        assert reward == 1.0 and info["report"]["status"] == "resolved"
    finally:
        env.close()
