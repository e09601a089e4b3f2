"""`evaluate_policy()` with a local transformers model: the tiny offline model plays Echo through its chat template."""

import pytest

from gymenvs.eval import evaluate_policy
from gymenvs.eval.policies import TransformersPolicy


def test_a_local_transformers_model_plays_episodes(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=4)
    summary = evaluate_policy("gymenvs/Echo-v0", policy, num_episodes=2, env_kwargs={"max_turns": 2}, progress=False)
    # Echo reads any text as a message: every turn counts, whatever the untrained model wrote.
    assert (summary.episodes, summary.mean_turns, summary.mean_reward, summary.failed_episodes) == (2, 2.0, 2.0, 0)


@pytest.mark.slow  # teaches the tiny model a call: 100 training steps, 6 to 13 s
def test_a_local_model_of_another_family_has_its_tool_calls_read_in_its_own_dialect():
    import gymnasium as gym

    from gymenvs.eval.policies.base import Conversation
    from wrappers.trl.extras.tiny_families import family_model, family_tokenizer
    from wrappers.trl.extras.tiny_model import imitate

    tokenizer = family_tokenizer("llama3_1")  # writes {"name": ..., "parameters": {...}}<|eot_id|>
    env = gym.make("gymenvs/Wordle-v0")
    observation, info = env.reset(seed=0)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": observation}], tools=info["tools"],
                                           add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    model = imitate(family_model(tokenizer), tokenizer, [prompt], ['{"name": "guess", "parameters": {"word": "crane"}}'])
    conversation = Conversation(TransformersPolicy(model, tokenizer, max_new_tokens=24), info["tools"], observation)
    action = conversation.act()
    assert action["tool_calls"][0]["function"] == {"name": "guess", "arguments": {"word": "crane"}}
    observation, *_ = env.step(action)
    conversation.observe(action, observation)
    assert observation.startswith("C R A N E") and conversation.messages[-1]["role"] == "tool"
    env.close()
