"""Agent CLIs trained through the model families' templates: `make_rollout_func` on SWEAgent-v0, the policy's side
rendered and read with the family's real template (tiny tokenizers built offline, wrappers/trl/extras/tiny_families.py),
real containers, the tiny model on CPU. Each CLI meets two families of different dialects: one whose template writes
the model's thought and one whose does not, so each CLI's wire format carries a thought and parallel calls; Claude
Code's and Codex's a single call too, as they meet the two families that write one call per turn (gpt-oss, Llama 3).
Every family, over every wire format, runs in the quick lane with the wire test agent on the host (test_host_agent_families.py).

The model's turns are written in the family's dialect: two parallel calls of the agent's own shell tool (one, for
the families whose template writes one call per turn) after a thought (for those whose template writes one), then
a plain reply, which ends the CLI's run. Each must reach
the agent as what it is (both commands run: their markers come back in the tool results; the thought is read as
reasoning, not text), and the episode must be token-exact: logprobs equal to one forward pass over the sequence,
`env_mask` 1 exactly on the sampled tokens, and the tool results the agent inserted rendered as the family's
template renders them (tests/trl/rollout/agent_families_support.py).
"""

from __future__ import annotations

import concurrent.futures

import pytest
from container.agent.cli_support import CLIS, FIXTURES

from tests.trl.rollout.agent_families_support import Played, check_the_calls_reached_the_agent, check_token_exact, play, scripted

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: Eight dialects, two to a CLI: (with a thought, without one).
CASES = {
    "gptoss": "claude-code", "qwen2_5": "claude-code",
    "glm4moe": "codex", "llama3_1": "codex",
    "lfm2_2_5": "opencode", "deepseekv3": "opencode",
    "nemotron_3_nano": "pi", "gemma4_v2": "pi",
}
FAMILIES = list(CASES)
IDS = [f"{family} through {agent}" for family, agent in CASES.items()]


def played_through_its_cli(family: str, case: Played) -> Played:
    return play(case, "gymenvs/SWEAgent-v0", {"agent": CASES[family], "instance_ids": [FIXTURES[0]], "max_turns": 3,
                                              "call_timeout_s": 120.0})


@pytest.fixture(scope="module")
def played(swe_images) -> dict[str, Played]:
    """Each family's episode, four at a time (most of an episode is waiting on its container)."""
    cases = [scripted(family, CLIS[agent].shell) for family, agent in CASES.items()]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return dict(zip(FAMILIES, pool.map(played_through_its_cli, FAMILIES, cases)))


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_the_calls_reach_the_agent_and_its_results_come_back(played, family):
    check_the_calls_reached_the_agent(played[family])


@pytest.mark.parametrize("family", FAMILIES, ids=IDS)
def test_the_episode_is_token_exact_in_the_familys_template(played, family):
    check_token_exact(played[family])
