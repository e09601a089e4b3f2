"""The agent rollout through every model family's template, in the quick lane: `make_rollout_func` on an agent env
whose agent (the wire test agent, tests/container/agent/wire_agent.py) runs on this host, each family over one of
the three wire formats, streamed or not (tests/trl/rollout/host_agent_support.py). The same scripted turns and
checks as the engine lane's matrix with the real CLIs (tests/trl/rollout/test_agent_families.py): the parallel calls
and the thought reach the agent in its wire format, both commands run, and the episode is token-exact in the
family's template."""

from __future__ import annotations

import pytest

from tests.trl.families_support import PARSED_FAMILIES
from tests.trl.rollout.agent_families_support import check_the_calls_reached_the_agent, check_token_exact, play, scripted
from tests.trl.rollout.host_agent_support import ENV_ID

WIRES = [(wire, stream) for stream in (False, True) for wire in ("chat", "responses", "anthropic")]
CASES = {family: WIRES[i % len(WIRES)] for i, family in enumerate(PARSED_FAMILIES)}
IDS = [f"{family} over {wire}{' streamed' if stream else ''}" for family, (wire, stream) in CASES.items()]


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


@pytest.mark.parametrize("family", PARSED_FAMILIES, ids=IDS)
def test_the_calls_reach_the_agent_and_the_episode_is_token_exact_in_the_familys_template(family):
    # Each family's episode is played by its own test, so that two workers never play the same one (a module fixture
    # playing all 24 ran on both workers when the module's tests were split between them: about 11 s each).
    wire, stream = CASES[family]
    played = play(scripted(family, bash), ENV_ID, {"wire": wire, "stream": stream, "max_turns": 3})
    check_the_calls_reached_the_agent(played)
    check_token_exact(played)
