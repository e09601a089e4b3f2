"""Fixtures of the agent env tests."""

from __future__ import annotations

import pytest
from env_support import envs_made


@pytest.fixture
def make_agent_env(swe_images):
    """Build SWEAgent-v0 envs for a test (the agent's calls may wait 60 s) and close them all afterwards."""
    with envs_made("gymenvs/SWEAgent-v0", call_timeout_s=60.0) as make:
        yield make
