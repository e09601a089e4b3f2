"""Black-box mode: the agent's calls go to an OpenAI-compatible upstream (the real tiny model behind a local
HTTP server); the env records each request / response pair."""

from __future__ import annotations

import json
import os

import pytest
from swe.swe_support import FIXTURE_IDS

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def upstream():
    from wrappers.trl.extras.tiny_model import tiny_model

    from .upstream_support import TinyChatServer

    model, tokenizer = tiny_model(seed=0)
    server = TinyChatServer(model, tokenizer)
    yield server
    server.close()


def test_black_box_episode_records_what_the_upstream_answered(swe_images, upstream):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    env = gym.make("gymenvs/SWEAgent-v0", mode="black-box", upstream_url=upstream.base_url, upstream_model="tiny-qwen2",
                   max_turns=3, call_timeout_s=60.0)
    try:
        observation, info = env.reset(options={"instance_id": FIXTURE_IDS[0]})
        assert info["request"]["model"] == "gymenvs-policy"
        done, steps = False, 0
        while not done:
            observation, reward, terminated, truncated, info = env.step(None)  # the action is ignored
            done, steps = terminated or truncated, steps + 1
    finally:
        env.close()
    assert steps == 3 and truncated and "step limit" in info["error"]
    trajectory = info["trajectory"]
    assert len(trajectory) == 3 and len(upstream.exchanges) == 3
    for record, (sent, answered) in zip(trajectory, upstream.exchanges):
        assert record["response"] == answered and record["status"] == 200
        assert sent["model"] == "tiny-qwen2" and sent["messages"] == record["request"]["messages"]
    # the agent received the upstream's text: it comes back in its next request
    replied = upstream.exchanges[0][1]["choices"][0]["message"]["content"]
    assert upstream.exchanges[1][0]["messages"][2] == {"role": "assistant", "content": replied}


@pytest.mark.parametrize(("upstream_model", "url", "status", "words"), [
    ("no-such-model", None, 404, "The model `no-such-model` does not exist"),
    (None, "http://127.0.0.1:9/v1", 502, "the upstream failed: Connection error"),
])
def test_an_upstream_failure_reaches_the_agent_and_ends_the_episode(swe_images, upstream, upstream_model, url, status, words):
    import gymnasium as gym

    import gymenvs  # noqa: F401

    env = gym.make("gymenvs/SWEAgent-v0", mode="black-box", upstream_url=url or upstream.base_url,
                   upstream_model=upstream_model, call_timeout_s=30.0)
    try:
        env.reset(options={"instance_id": FIXTURE_IDS[0]})
        observation, reward, terminated, truncated, info = env.step(None)
    finally:
        env.close()
    assert truncated and not terminated and f"HTTP {status}" in info["error"] and words in info["error"], info["error"]
    (record,) = info["trajectory"]
    assert record["status"] == status and words in json.dumps(record["response"])
    assert info["report"]["status"] == "unresolved"  # the work so far is still graded


def test_black_box_mode_needs_an_upstream():
    from .agent_support import swe_agent_env

    with pytest.raises(ValueError, match="black-box mode needs an upstream_url"):
        swe_agent_env(mode="black-box")


def test_an_anthropic_agent_in_black_box_mode_gets_the_upstreams_answer_as_a_message(swe_images, upstream):
    """The request goes upstream in the internal form (Chat Completions); the answer comes back to the agent as an
    Anthropic message, streamed; its side calls go upstream too, but its token count is answered here."""
    from anthropic.types import Message

    from .agent_support import swe_agent_env, wire_agent

    env = swe_agent_env(agent=wire_agent("anthropic", GYMENVS_MAX_TOKENS="16"), mode="black-box",
                        upstream_url=upstream.base_url, upstream_model="tiny-qwen2", max_turns=3, call_timeout_s=60.0,
                        instance_ids=[FIXTURE_IDS[0]])
    before = len(upstream.exchanges)
    try:
        _, info = env.reset(seed=0)
        assert info["request"]["wire"] == "anthropic" and info["side_calls"] == 2
        _, _, terminated, truncated, info = env.step(None)
    finally:
        env.close()
    side, main = info["trajectory"][:2], info["trajectory"][2]
    assert [record["side"] for record in side] == ["count_tokens", "small_model"] and main["side"] is None
    sent = [request for request, _ in upstream.exchanges[before:]]
    assert len(sent) == 2 and sent[1]["messages"] == main["request"]["messages"]  # the token count stayed here
    message = Message.model_validate(main["response"])
    choice = upstream.exchanges[before + 1][1]["choices"][0]
    assert message.content[0].type == "text" and message.content[0].text == choice["message"]["content"]
    assert message.stop_reason == {"stop": "end_turn", "length": "max_tokens"}[choice["finish_reason"]]
