"""Helpers of the agent env tests (SWEAgent-v0): a scripted policy's replies, the test agents, and what a test
process leaves behind. Imported as `container.agent.agent_support` (pytest puts tests/ on the path)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from swe.swe_support import FIXTURE_TASKS, own_containers

__all__ = ["FORGETFUL_AGENT", "SWE_FAMILY", "TASKS", "WIRE_AGENT", "agent_threads", "apply_patch", "bash", "forgetful_agent",
           "own_containers", "swe_agent_env", "wire_agent"]

TASKS = {task.instance_id: task for task in FIXTURE_TASKS}
#: The family of SWEAgent-v0, as its registration names it.
SWE_FAMILY = "gymenvs.swe.family:SWEFamily"
#: A stdlib-only agent speaking one wire format (GYMENVS_WIRE), as the CLIs do: see the file.
WIRE_AGENT = Path(__file__).parent / "wire_agent.py"
#: A stdlib-only agent that rewrites its history once (its third request is a summary): see the file.
FORGETFUL_AGENT = Path(__file__).parent / "forgetful_agent.py"


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def apply_patch(patch: str) -> dict:
    """A bash call that writes `patch` outside the repository with a heredoc and applies it."""
    write = f"cat > /tmp/gold.patch <<'GYMENVS_PATCH_END'\n{patch}GYMENVS_PATCH_END\n"
    return bash(write + "git apply /tmp/gold.patch && git status --short")


def agent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("gymenvs-llm-channel", "gymenvs-agent-watcher"))]


def swe_agent_env(**kwargs: Any):
    """An `AgentEnv` of the SWE family built directly (as gymenvs/SWEAgent-v0 is, without `gym.make`'s wrappers)."""
    from gymenvs.container.agent.env import AgentEnv

    return AgentEnv(family=SWE_FAMILY, **kwargs)


def wire_agent(wire: str, **environment: str) -> Any:
    """The wire test agent speaking `wire` ("chat", "responses", "anthropic"), streamed, as an `AgentSpec`."""
    from gymenvs.container.agent.specs import AgentSpec

    return AgentSpec(
        f"wire-{wire}",
        command="exec python3 /run/gymenvs/wire_agent.py",
        files=(str(WIRE_AGENT),),
        environment={"GYMENVS_WIRE": wire, "GYMENVS_STREAM": "1", **environment},
    )


def forgetful_agent() -> Any:
    """The forgetful test agent as an `AgentSpec`."""
    from gymenvs.container.agent.specs import AgentSpec

    return AgentSpec("forgetful", command="exec python3 /run/gymenvs/forgetful_agent.py", files=(str(FORGETFUL_AGENT),))


SUBMIT = {"name": "submit", "arguments": {}}
#: A script of a new process that makes SWEAgent-v0 (touching no engine), resets it and prints what it reaped.
NEXT_PROCESS = ("import gymnasium as gym, gymenvs, json\n"
                "from gymenvs.container import runtime\n"
                "env = gym.make('gymenvs/SWEAgent-v0')\n"
                "assert env.unwrapped._runtime == 'docker' and not runtime._shared  # constructing touches no engine\n"
                "env.reset(seed=0)\n"
                "print(json.dumps(env.unwrapped.reaped)); env.close()\n")
