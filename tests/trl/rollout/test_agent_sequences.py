"""Agent episodes whose agent rewrote its history: every sequence becomes an AsyncGRPO sample with the episode's
advantage, computed over whole episodes, and the group keeps its id."""

from types import SimpleNamespace

from wrappers.trl.async_grpo.worker import EnvRolloutWorker, _advantages, _Group
from wrappers.trl.rollout.agent import AgentEpisode


def agent_episode(reward: float, rewrites: int) -> AgentEpisode:
    episode = AgentEpisode(seed=0, prompt_ids=[1, 2], messages=[{"role": "user", "content": "fix it"}])
    episode.completion_ids, episode.logprobs, episode.env_mask, episode.reward = [3, 4], [-0.5, 0.0], [1, 0], reward
    for rewrite in range(rewrites):
        episode._restart([5, 6 + rewrite], [{"role": "user", "content": f"summary {rewrite}"}])
        episode.completion_ids, episode.logprobs, episode.env_mask = [7, 8], [-0.25, 0.0], [1, 0]
    return episode


def test_every_sequence_of_a_rewritten_episode_is_a_sample_with_the_episodes_advantage():
    episodes = [agent_episode(1.0, rewrites=0), agent_episode(0.0, rewrites=2)]
    worker, group = SimpleNamespace(_prompt_messages=1), _Group(group_id=7, seed=0, model_version=3)
    advantages, reward_std = _advantages(episodes)
    samples = [sample for episode, advantage in zip(episodes, advantages)
               for sample in EnvRolloutWorker._samples(worker, group, episode, advantage, reward_std)]  # type: ignore[arg-type]
    assert len(samples) == 1 + 3
    # Advantages over the two episodes (rewards 1 and 0: +1 and -1), not over the four samples.
    assert [round(s.advantage, 6) for s in samples] == [1.0, -1.0, -1.0, -1.0]
    assert {s.group_id for s in samples} == {7} and {s.model_version for s in samples} == {3}
    assert [s.input_ids.tolist() for s in samples[1:]] == [[1, 2, 3, 4], [5, 6, 7, 8], [5, 7, 7, 8]]
    assert all(s.completion_mask.tolist() == [0, 0, 1, 0] for s in samples)


def test_a_sequence_the_model_sampled_nothing_in_is_not_a_sample():
    episode = agent_episode(0.0, rewrites=1)
    episode._restart([9], [{"role": "user", "content": "rewritten, then the agent exited"}])
    assert [sequence["prompt_ids"] for sequence in episode.token_sequences()] == [[1, 2], [5, 6]]
