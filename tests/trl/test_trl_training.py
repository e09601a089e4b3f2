"""GRPOTrainer on CPU with a tiny model: both paths train for two steps and the env's rewards reach it."""

import statistics

import gymnasium as gym
import pytest
import torch
from bridge_support import teach_tool_calls, tool_call
from trl import GRPOConfig, GRPOTrainer

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset, make_rollout_func

pytestmark = [
    pytest.mark.slow,
    # trl 1.16 still calls transformers' gradient_checkpointing* names, which transformers 5.23 deprecates.
    pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning"),
]

GROUP = 2  # num_generations


def config(tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path),
        **CPU_TRAINING_ARGS,
        per_device_train_batch_size=4,
        num_generations=GROUP,
        max_completion_length=96,
        max_steps=2,
        max_tool_calling_iterations=2,
        logging_steps=1,
        learning_rate=1e-3,
        seed=0,
    )
    return GRPOConfig(**{**settings, **overrides})


def first_prompt(observation):
    return [{"role": "system", "content": "Episode 0."}, {"role": "user", "content": observation}]


def snapshot(model):
    return [parameter.detach().clone() for parameter in model.parameters()]


def changed(before, model):
    return any(not torch.equal(old, new) for old, new in zip(before, model.parameters()))


def reward_logs(trainer, column):
    return [entry for entry in trainer.state.log_history if f"rewards/{column}/mean" in entry]


@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "tool", "choices"),
    [
        ("gymenvs/Wordle-v0", {"words": ["crane", "slate"]}, "guess", [{"word": "crane"}, {"word": "slate"}]),
        ("gymenvs/Catch-v0", {"rows": 2, "columns": 3}, "move", [{"direction": d} for d in ("left", "stay", "right")]),
    ],
)
def test_environment_factory_trains_and_the_env_reward_reaches_the_trainer(
    model_and_tokenizer, tmp_path, env_id, env_kwargs, tool, choices
):
    model, tokenizer = model_and_tokenizer
    Environment = environment_factory(env_id, **env_kwargs)
    probe = Environment()
    observation = probe.reset(prompt=[{"role": "user", "content": ""}], seed=0)
    teach_tool_calls(
        model,
        tokenizer,
        first_prompt(observation),
        [tool_call(tool, **c) for c in choices],
        tools=[getattr(probe, name) for name in sorted(type(probe.env.unwrapped).tools)],  # as TRL lists them
    )
    before = snapshot(model)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config(tmp_path),
        train_dataset=episode_dataset(16),
        environment_factory=Environment,
    )
    trainer.train()

    assert changed(before, model)
    logs = reward_logs(trainer, Environment.__name__)
    assert len(logs) == 2
    assert any(entry["tools/call_frequency"] > 0 for entry in logs)
    assert any(entry[f"rewards/{Environment.__name__}/std"] > 0 for entry in logs)  # a learning signal
    # The last step's logged reward is the mean of what its environments' get_reward() returned.
    last_rewards = [environment.get_reward() for environment in trainer.environments]
    assert logs[-1][f"rewards/{Environment.__name__}/mean"] == pytest.approx(statistics.mean(last_rewards))


def test_environment_factory_group_members_start_from_the_same_state(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    Wordle = environment_factory("gymenvs/Wordle-v0")
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config(tmp_path, max_steps=1, per_device_train_batch_size=8),
        train_dataset=episode_dataset(16),
        environment_factory=Wordle,
    )
    trainer.train()
    secrets = [environment.env.unwrapped.state()["secret"] for environment in trainer.environments]
    groups = [secrets[i : i + GROUP] for i in range(0, len(secrets), GROUP)]
    assert all(len(set(group)) == 1 for group in groups)
    assert len({group[0] for group in groups}) > 1


def test_rollout_func_trains_on_wordle_and_the_env_reward_reaches_the_trainer(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func("gymenvs/Wordle-v0", env_kwargs={"words": ["crane", "slate"]}, max_tokens_per_turn=32)
    observation, _ = gym.make("gymenvs/Wordle-v0").reset(seed=0)
    teach_tool_calls(
        model,
        tokenizer,
        first_prompt(observation),
        [tool_call("guess", word=w) for w in ("crane", "slate")],
        tools=rollout.tools,
    )
    outputs = []

    def recording_rollout(prompts, trainer):
        outputs.append(rollout(prompts, trainer))
        return outputs[-1]

    before = snapshot(model)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config(tmp_path, per_device_train_batch_size=8),
        train_dataset=episode_dataset(16),
        rollout_func=recording_rollout,
        reward_funcs=rollout.reward_func,
    )
    trainer.train()
    rollout.close()

    assert changed(before, model)
    logs = reward_logs(trainer, "env_reward")
    assert len(logs) == len(outputs) == 2
    for entry, output in zip(logs, outputs):
        assert entry["rewards/env_reward/mean"] == pytest.approx(statistics.mean(output["env_reward"]))
        assert (
            [len(ids) for ids in output["completion_ids"]]
            == [len(m) for m in output["env_mask"]]
            == [len(lp) for lp in output["logprobs"]]
        )
        prompt_ids = output["prompt_ids"]
        assert all(
            prompt_ids[i] == prompt_ids[i + 1] for i in range(0, len(prompt_ids), GROUP)
        )  # one start state per group
    assert any(entry["rewards/env_reward/std"] > 0 for entry in logs)
    assert any(
        0 in mask for output in outputs for mask in output["env_mask"]
    )  # multi-turn: env replies in the completions
