"""What the tests of the tools env (SWE-v0) share: tool calls as an agent sends them, and starting and submitting
an episode on a fixture task. Imported relatively in tests/container, as `container.tools_support` elsewhere."""

from __future__ import annotations

from swe.swe_support import FIXTURE_TASKS

TASKS = {task.instance_id: task for task in FIXTURE_TASKS}
SUBMIT = {"name": "submit", "arguments": {}}
#: A conftest.py that reports every test as passed: the cheat grading must not fall for.
FORCE_PASS_CONFTEST = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def write_and_apply(patch: str, name: str) -> dict:
    """A bash tool call that writes `patch` with a heredoc and applies it, as an agent would."""
    return bash(f"cat > /tmp/{name} <<'GYMENVS_PATCH_END'\n{patch}GYMENVS_PATCH_END\ngit apply /tmp/{name} && git status --short")


def start(make_env, instance_id: str, **kwargs):
    """A SWE-v0 (from the `make_env` fixture) with its episode on `instance_id` started."""
    env = make_env(**kwargs)
    observation, info = env.reset(options={"instance_id": instance_id})
    assert info["instance_id"] == instance_id and TASKS[instance_id].problem_statement.split("\n")[0] in observation
    return env


def submit(env) -> tuple[float, dict]:
    """Submit, and check grading gave a verdict on the agent; the reward and the report."""
    observation, reward, terminated, truncated, info = env.step(SUBMIT)
    assert terminated and not truncated, info.get("error")
    assert observation.startswith("Grading: ")
    assert info["outcome"] == "model"  # a verdict on the agent
    return reward, info["report"]


def ending(info: dict) -> tuple[str, str]:
    return info["outcome"], info["outcome_reason"]
