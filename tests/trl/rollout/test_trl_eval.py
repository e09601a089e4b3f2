"""`evaluate_policy()` with a local transformers model: the tiny offline model plays Echo through its chat template."""

from gymenvs.eval import evaluate_policy
from gymenvs.eval.policies import TransformersPolicy


def test_a_local_transformers_model_plays_episodes(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    policy = TransformersPolicy(model, tokenizer, max_new_tokens=4)
    summary = evaluate_policy("gymenvs/Echo-v0", policy, num_episodes=2, env_kwargs={"max_turns": 2}, progress=False)
    # Echo reads any text as a message: every turn counts, whatever the untrained model wrote.
    assert (summary.episodes, summary.mean_turns, summary.mean_reward, summary.failed_episodes) == (2, 2.0, 2.0, 0)
