"""Helpers of the SWEAgent-v0 tests: a scripted policy's replies, and env set-up."""

from __future__ import annotations

import os
import threading

from gymenvs.container.runtime.owners import LABEL_PID

from swe.swe_support import FIXTURE_TASKS

TASKS = {task.instance_id: task for task in FIXTURE_TASKS}


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def apply_patch(patch: str) -> dict:
    """A bash call that writes `patch` outside the repository with a heredoc and applies it."""
    write = f"cat > /tmp/gold.patch <<'GYMENVS_PATCH_END'\n{patch}GYMENVS_PATCH_END\n"
    return bash(write + "git apply /tmp/gold.patch && git status --short")


def own_containers(client) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL_PID}={os.getpid()}"})


def agent_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(("gymenvs-llm-channel", "gymenvs-agent-watcher"))]
