"""`gymenvs.trajectories.tokens.samples`: a trajectory's tokens by who produced them, for the viewer's token page."""

from gymenvs.trajectories import TrajectoryRecorder
from gymenvs.trajectories.tokens import samples


def recorder() -> TrajectoryRecorder:
    return TrajectoryRecorder(agent_name="policy", agent_version="1")


def producers(sample) -> list[tuple[str, int, list[int]]]:
    return [(segment.producer, segment.step_id, segment.token_ids) for segment in sample.segments]


def test_a_rollout_trajectory_is_its_prompt_then_each_turn_sampled_then_the_env_tokens():
    trajectory = recorder()
    trajectory.add_step("user", "Go.")
    trajectory.add_step("agent", "a", observation="r1", metrics={
        "prompt_token_ids": [1, 2, 3], "completion_token_ids": [4, 5], "logprobs": [-0.1, -2.0],
        "extra": {"env_token_ids": [6, 7]}})
    trajectory.add_step("agent", "b", observation="r2", metrics={"completion_token_ids": [8], "logprobs": [-0.5]})
    [sample] = samples(trajectory.finish(reward=1.0, info={}))
    assert producers(sample) == [("prompt", 2, [1, 2, 3]), ("policy", 2, [4, 5]), ("env", 2, [6, 7]), ("policy", 3, [8])]
    assert sample.segments[1].logprobs == [-0.1, -2.0] and sample.segments[2].logprobs is None
    assert sample.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert sample.env_mask == [1, 1, 0, 0, 1]  # 1 exactly on the sampled tokens; the prompt has none


def test_an_env_mask_in_the_metrics_splits_one_completion_list():
    trajectory = recorder()
    trajectory.add_step("agent", "", metrics={"prompt_token_ids": [1], "completion_token_ids": [2, 3, 4, 5],
                                              "logprobs": [-1.0, 0.0, 0.0, -3.0], "extra": {"env_mask": [1, 0, 0, 1]}})
    [sample] = samples(trajectory.finish(reward=0.0, info={}))
    assert producers(sample) == [("prompt", 1, [1]), ("policy", 1, [2]), ("env", 1, [3, 4]), ("policy", 1, [5])]
    assert [segment.logprobs for segment in sample.segments] == [None, [-1.0], None, [-3.0]]


def test_whole_prompts_per_turn_continue_the_sample_and_a_rewritten_history_starts_a_new_one():
    trajectory = recorder()  # a producer that gives each turn its whole prompt (Harbor's agents do)
    trajectory.add_step("agent", "", metrics={"prompt_token_ids": [1, 2], "completion_token_ids": [3]})
    trajectory.add_step("agent", "", metrics={"prompt_token_ids": [1, 2, 3, 4, 5], "completion_token_ids": [6]})
    trajectory.add_step("agent", "", metrics={"prompt_token_ids": [1, 9], "completion_token_ids": [7]})  # summarised
    first, second = samples(trajectory.finish(reward=0.0, info={}))
    assert producers(first) == [("prompt", 1, [1, 2]), ("policy", 1, [3]), ("env", 2, [4, 5]), ("policy", 2, [6])]
    assert producers(second) == [("prompt", 3, [1, 9]), ("policy", 3, [7])]


def test_a_trajectory_without_tokens_has_no_sample():
    trajectory = recorder()
    trajectory.add_step("agent", "hi", metrics={"prompt_tokens": 10, "completion_tokens": 2})
    assert samples(trajectory.finish(reward=0.0, info={})) == []
