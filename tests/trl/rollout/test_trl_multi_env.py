"""Several envs in one GRPO run, and distinct episodes per group, through a real GRPOTrainer on CPU.

Each test counts the start states (Wordle secret, Catch ball column) of 16 rollouts in 4 groups
of 4: one start per group, and different groups starting differently.
"""

import gymnasium as gym
import pytest
from bridge_support import groups_of, recorded_envs
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, make_rollout_func

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*nothing in them tells episodes apart:UserWarning"),
]

GROUP, ROLLOUTS = 4, 16


@pytest.fixture
def recorded():
    wordle, catch, starts = recorded_envs()
    gym.register("gymenvs_tests/RecordedWordle-v0", entry_point=wordle)
    gym.register("gymenvs_tests/RecordedCatch-v0", entry_point=catch)
    yield starts
    del gym.registry["gymenvs_tests/RecordedWordle-v0"], gym.registry["gymenvs_tests/RecordedCatch-v0"]


def train_one_step(model_and_tokenizer, tmp_path, **kwargs):
    model, tokenizer = model_and_tokenizer
    config = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS,
        per_device_train_batch_size=ROLLOUTS, num_generations=GROUP, max_completion_length=16, max_steps=1,
        max_tool_calling_iterations=1, logging_steps=1,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, **kwargs)
    trainer.train()
    return trainer


def assert_one_start_per_group_and_groups_differ(states):
    groups = groups_of(states, GROUP)
    assert all(len(set(group)) == 1 for group in groups), groups
    assert len({group[0] for group in groups}) == len(groups), groups


def wordle_reward(environments, **kwargs):  # as TRL's multi_env example writes it
    return [env.reward if env.env_id.endswith("Wordle-v0") else None for env in environments]


def catch_reward(environments, **kwargs):
    return [
        (max(env.reward, 0.0) if env.done else 0.0) if env.env_id.endswith("Catch-v0") else None
        for env in environments
    ]


def test_factory_dict_form_without_seeds_gives_each_group_its_own_start_and_counts_rewards_once(
    model_and_tokenizer, tmp_path, recorded
):
    factories = {
        "wordle": environment_factory("gymenvs_tests/RecordedWordle-v0", env_reward=False),
        "catch": environment_factory("gymenvs_tests/RecordedCatch-v0", env_reward=False, rows=3),
    }
    dataset = Dataset.from_dict({"environment": ["wordle"] * 4 + ["catch"] * 4})  # TRL's documented dict form
    trainer = train_one_step(
        model_and_tokenizer, tmp_path, train_dataset=dataset, environment_factory=factories,
        reward_funcs=[wordle_reward, catch_reward],
    )
    assert trainer.reward_func_names == ["wordle_reward", "catch_reward"]  # the env's own reward is not added
    assert "rewards/wordle_reward/mean" in trainer.state.log_history[0]
    for env in ("wordle", "catch"):
        states = [state for name, state in recorded if name == env]
        assert len(states) % GROUP == 0 and states
        groups = groups_of(states, GROUP)
        assert all(len(set(group)) == 1 for group in groups), groups
    secrets = [state for name, state in recorded if name == "wordle"]
    assert len(set(secrets)) == len(secrets) // GROUP  # before: one secret for every group


def test_factory_without_a_train_dataset_gives_each_group_its_own_start(model_and_tokenizer, tmp_path, recorded):
    train_one_step(
        model_and_tokenizer, tmp_path, environment_factory=environment_factory("gymenvs_tests/RecordedWordle-v0")
    )
    assert len(recorded) == ROLLOUTS
    assert_one_start_per_group_and_groups_differ([state for _, state in recorded])


def test_rollout_plays_several_envs_picked_by_the_environment_column(model_and_tokenizer, tmp_path, recorded):
    rollout = make_rollout_func(
        {"wordle": "gymenvs_tests/RecordedWordle-v0", "catch": ("gymenvs_tests/RecordedCatch-v0", {"rows": 3})},
        max_tokens_per_turn=8,
    )
    outputs = []

    def recording(prompts, trainer):
        outputs.append(rollout(prompts, trainer))
        return outputs[-1]

    # Without environment_factory TRL needs a prompt column: empty prompts, the env supplies the task.
    empty = [{"role": "user", "content": ""}]
    dataset = Dataset.from_dict({"prompt": [empty] * 8, "environment": ["wordle", "catch"] * 4})
    trainer = train_one_step(
        model_and_tokenizer, tmp_path, train_dataset=dataset, rollout_func=recording,
        reward_funcs=[rollout.reward_func_for("wordle"), rollout.reward_func_for("catch")],
    )
    rollout.close()
    assert trainer.reward_func_names == ["wordle_reward", "catch_reward"]
    (output,) = outputs
    assert sorted(set(output["env_name"])) == ["catch", "wordle"]
    assert all(len(set(group)) == 1 for group in groups_of(output["env_name"], GROUP))  # a group plays one env
    # Envs reset in worker threads, so `recorded` is not in slot order: compare the episodes' seeds.
    assert_one_start_per_group_and_groups_differ(output["env_seed"])
    secrets = [state for name, state in recorded if name == "wordle"]
    assert len(secrets) == output["env_name"].count("wordle")
    assert len(set(secrets)) == len(secrets) // GROUP  # rows without seeds: each group its own start


def test_rollout_honours_the_seed_column_and_options(model_and_tokenizer, tmp_path, recorded):
    prompt = [{"role": "user", "content": "Play."}]
    dataset = Dataset.from_dict(
        {"prompt": [prompt] * 4, "seed": [0, 1, 2, 3], "options": [None, None, None, {"secret": "crane"}]}
    )
    rollout = make_rollout_func("gymenvs_tests/RecordedWordle-v0", max_tokens_per_turn=8)
    outputs = []

    def recording(prompts, trainer):
        outputs.append(rollout(prompts, trainer))
        return outputs[-1]

    train_one_step(
        model_and_tokenizer, tmp_path, train_dataset=dataset, rollout_func=recording, reward_funcs=rollout.reward_func
    )
    rollout.close()
    (output,) = outputs
    assert_one_start_per_group_and_groups_differ(output["env_seed"])
    assert sorted(output["env_seed"][::GROUP]) == [0, 1, 2, 3]
    states = [state for _, state in recorded]
    assert len(set(states)) == 4  # before: identical prompts gave one start for all
    expected = {}
    for seed in range(3):
        env = gym.make("gymenvs/Wordle-v0")
        env.reset(seed=seed)
        expected[env.unwrapped.state()["secret"]] = seed
    assert set(states) == set(expected) | {"crane"}


def test_rows_that_nothing_distinguishes_warn(recorded):
    Wordle = environment_factory("gymenvs_tests/RecordedWordle-v0")
    row = {"prompt": [{"role": "user", "content": ""}]}
    first, second = Wordle(), Wordle()
    first.reset(**row)
    with pytest.warns(UserWarning, match="nothing in them tells episodes apart"):
        second.reset(prompt=[{"role": "user", "content": "other"}])
        first.reset(**row)  # the same row again, after another one: no group size known here
    grouped = environment_factory("gymenvs_tests/RecordedWordle-v0", group_size=2)
    instances = [grouped() for _ in range(4)]
    with pytest.warns(UserWarning, match="told apart by their order"):
        for instance in instances:
            instance.reset(**row)
    assert_one_start_per_group = groups_of([state for _, state in recorded[-4:]], 2)
    assert all(len(set(group)) == 1 for group in assert_one_start_per_group)
    assert assert_one_start_per_group[0] != assert_one_start_per_group[1]
