"""make_rollout_func(..., trajectories=DIR): each batch's episodes as ATIF trajectories holding the tokens that trained,
exactly (no retokenization), with the messages and how each episode ended."""

import gymnasium as gym
import pytest
import torch

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.trajectories import read_trajectories
from gymenvs.trajectories.tokens import training_sequences
from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func


def play(model_and_tokenizer, tmp_path, env_id="gymenvs/Echo-v0", prompts=3, **options):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func(env_id, trajectories=tmp_path / "runs", max_tokens_per_turn=6, **options)
    torch.manual_seed(0)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    episodes = rollout.run([[{"role": "user", "content": "Go."}]] * prompts, generator, tokenizer, max_completion_length=200)
    rollout.close()
    return episodes


def test_each_episode_is_a_trajectory_with_the_exact_tokens_logprobs_and_env_mask(model_and_tokenizer, tmp_path):
    episodes = play(model_and_tokenizer, tmp_path, env_kwargs={"max_turns": 3})
    [batch] = sorted((tmp_path / "runs").iterdir())
    assert batch.name == "batch-000001"
    trajectories = read_trajectories(batch)
    assert len(trajectories) == len(episodes) == 3
    by_tokens = {tuple(training_sequences(t)[0]["completion_ids"]): t for t in trajectories}
    for episode in episodes:
        trajectory = by_tokens[tuple(episode.completion_ids)]
        assert training_sequences(trajectory) == episode.token_sequences() == [{
            "prompt_ids": episode.prompt_ids, "completion_ids": episode.completion_ids, "logprobs": episode.logprobs,
            "env_mask": episode.env_mask}]
        agent = [step for step in trajectory.steps if step.source == "agent"]
        said = [message for message in episode.messages if message["role"] == "assistant"]
        assert [step.message for step in agent] == [message["content"] for message in said]
        replies = [message["content"] for message in episode.messages[1:] if message["role"] != "assistant"]
        assert [step.observation.results[0].content for step in agent] == replies  # Echo's replies, on the turns
        extra = trajectory.extra["gymenvs"]
        assert (extra["env_id"], extra["seed"], extra["reward"], extra["turns"]) == ("gymenvs/Echo-v0", episode.seed,
                                                                                       episode.reward, 3)
        assert extra["end"] == "truncated" and extra["outcome"] == "model"
        assert trajectory.final_metrics.total_completion_tokens == sum(episode.env_mask)


def test_every_batch_gets_its_own_folder(model_and_tokenizer, tmp_path):
    play(model_and_tokenizer, tmp_path, prompts=2, env_kwargs={"max_turns": 1})
    play(model_and_tokenizer, tmp_path, prompts=2, env_kwargs={"max_turns": 1})
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["batch-000001", "batch-000002"]


def test_a_tool_env_trajectory_has_the_tool_calls_and_the_tool_schemas(model_and_tokenizer, tmp_path):
    episodes = play(model_and_tokenizer, tmp_path, "gymenvs/Wordle-v0", prompts=1)
    [trajectory] = read_trajectories(next((tmp_path / "runs").iterdir()))
    names = [tool["function"]["name"] for tool in trajectory.agent.tool_definitions]
    assert names == [tool["function"]["name"] for tool in gym.make("gymenvs/Wordle-v0").unwrapped.tool_schemas()]
    assert training_sequences(trajectory)[0]["completion_ids"] == episodes[0].completion_ids


def test_files_are_written_in_the_background_and_a_failed_write_is_raised_at_close(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    blocked = tmp_path / "runs"
    blocked.write_text("a file where the folder should be")
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 1}, max_tokens_per_turn=6, trajectories=blocked)
    generator = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))
    episodes = rollout.run(["Go."], generator, tokenizer, max_completion_length=200)
    assert episodes[0].turns == 1  # the rollout itself does not wait for, nor fail with, its files
    with pytest.raises(OSError):
        rollout.close()


def rewritten_episode(*, sampled_after_last_rewrite: bool):
    """An agent episode whose agent rewrote its history twice (as tests/trl/rollout/test_agent_sequences.py builds one)."""
    from wrappers.trl.rollout.agent import AgentEpisode

    episode = AgentEpisode(seed=0, prompt_ids=[1, 2], messages=[{"role": "user", "content": "fix it"}])
    episode.completion_ids, episode.logprobs, episode.env_mask = [3, 4], [-0.5, 0.0], [1, 0]
    episode._restart([5, 6], [{"role": "user", "content": "summary 1"}])
    episode.completion_ids, episode.logprobs, episode.env_mask = [7, 8], [-0.25, 0.0], [1, 0]
    episode._restart([5, 9], [{"role": "user", "content": "summary 2"}])
    if sampled_after_last_rewrite:
        episode.completion_ids, episode.logprobs, episode.env_mask = [10, 11], [-1.5, 0.0], [1, 0]
        episode.messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "ok"}]
    episode.end_reason, episode.reward = "terminated", 1.0
    return episode


@pytest.mark.parametrize("sampled_after_last_rewrite", [True, False])
def test_an_agent_episode_that_rewrote_its_history_keeps_every_sequence(sampled_after_last_rewrite):
    from wrappers.trl.rollout.trajectories import episode_trajectory

    episode = rewritten_episode(sampled_after_last_rewrite=sampled_after_last_rewrite)
    trajectory = episode_trajectory(episode, env_id="gymenvs/SWEAgent-v0")
    assert training_sequences(trajectory) == episode.token_sequences()
    assert len(episode.token_sequences()) == (3 if sampled_after_last_rewrite else 2)
    assert [step.message for step in trajectory.steps] == ["summary 2", *(["done"] if sampled_after_last_rewrite else [])]
