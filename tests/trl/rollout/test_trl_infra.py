"""The TRL bridge never trains on an episode that infrastructure ended: it replays it from the same start,
and what still fails reaches TRL as a missing reward (None, NaN in TRL), never as a 0."""

from types import SimpleNamespace

import pytest
from infra_support import InfraEcho, register

from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
from wrappers.trl.rollout.base import env_reward

ECHO = {"max_turns": 2}
SEEDS = [10, 10, 11, 11, 12, 12]  # three groups of two, as TRL repeats each prompt


def generator_for(model, tokenizer):
    return TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=1.0))


class FakeTrainer:
    """What `EnvRollout.__call__` reads from a GRPOTrainer, and its `_log_metric` hook."""

    def __init__(self, model, tokenizer):
        self.processing_class = tokenizer
        self.args = SimpleNamespace(chat_template_kwargs=None, max_completion_length=60)
        self.model = model
        self.num_generations = 2
        self.use_vllm = False
        self.logged: dict[str, list[float]] = {}

    def _log_metric(self, name, value):
        self.logged.setdefault(name, []).append(value)


def play(model, tokenizer, failing_seeds, failures, **options):
    env_id = register()
    rollout = make_rollout_func(
        env_id, env_kwargs={**ECHO, "failing_seeds": failing_seeds, "failures": failures}, max_tokens_per_turn=4, **options
    )
    try:
        return rollout, rollout.run(["Go."] * len(SEEDS), generator_for(model, tokenizer), tokenizer, seeds=SEEDS,
                                    max_completion_length=60)
    finally:
        rollout.close()


def test_an_episode_that_infra_ended_is_replayed_from_the_same_seed_and_the_group_stays_full(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout, episodes = play(model, tokenizer, failing_seeds=(11,), failures=2)
    assert InfraEcho.attempts == {10: 2, 11: 4, 12: 2}  # both seed-11 episodes failed once, then replayed
    assert [episode.seed for episode in episodes] == SEEDS
    assert all(episode.trainable and episode.outcome == "model" for episode in episodes)
    assert [episode.reward for episode in episodes] == [2.0] * len(SEEDS)  # Echo pays 1 a turn: no fault's 0
    assert [episode.retries for episode in episodes] == [0, 0, 1, 1, 0, 0]
    assert rollout.outcome_counts == {"infra_failures": 2, "retries": 2, "dropped": 0}


def test_an_episode_that_always_fails_is_dropped_as_a_missing_reward_never_a_zero(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout, episodes = play(model, tokenizer, failing_seeds=(12,), failures=99, infra_retries=1)
    assert InfraEcho.attempts[12] == 4  # two episodes, each played twice: the first try and one retry
    dropped = [episode for episode in episodes if not episode.trainable]
    assert [episode.seed for episode in dropped] == [12, 12]
    assert {(episode.outcome, episode.outcome_reason) for episode in dropped} == {("infra", "grading_timeout")}
    assert rollout.outcome_counts == {"infra_failures": 4, "retries": 2, "dropped": 2}


def test_the_rollout_func_hands_trl_none_for_a_dropped_episode_and_logs_the_counts(model_and_tokenizer, monkeypatch):
    from wrappers.trl import trl_internals

    model, tokenizer = model_and_tokenizer
    trainer = FakeTrainer(model, tokenizer)
    prompts = [[{"role": "user", "content": f"Seed {seed}."}] for seed in SEEDS]
    monkeypatch.setattr(  # the dataset rows TRL's generation step holds
        trl_internals, "batch_rows", lambda _: [{"prompt": prompt, "seed": seed} for prompt, seed in zip(prompts, SEEDS)]
    )
    rollout = make_rollout_func(
        register(), env_kwargs={**ECHO, "failing_seeds": (11, 12), "failures": 4}, max_tokens_per_turn=4, infra_retries=1
    )
    rollout._trainer_generator = (trainer, generator_for(model, tokenizer))
    try:
        output = rollout(prompts, trainer)
    finally:
        rollout.close()
    # Each episode of seeds 11 and 12 fails twice: one retry is not enough, so all four of their episodes are dropped.
    assert output["env_reward"] == [2.0, 2.0, None, None, None, None]
    assert output["env_outcome"] == ["model", "model", "infra", "infra", "infra", "infra"]
    assert output["env_retries"] == [0, 0, 1, 1, 1, 1]
    assert env_reward(env_reward=output["env_reward"]) == [2.0, 2.0, None, None, None, None]
    assert trainer.logged == {"infra_failures": [8.0], "retries": [4.0], "dropped": [4.0]}


@pytest.mark.parametrize("retries", [-1, True, "2"])
def test_infra_retries_must_be_a_non_negative_integer(retries):
    with pytest.raises(ValueError, match="infra_retries"):
        make_rollout_func(register(), env_kwargs=ECHO, infra_retries=retries)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_grpo_step_over_an_env_that_fails_on_one_seed_trains_and_logs_the_counts(model_and_tokenizer, tmp_path):
    """Seed 1 always ends infra: its two episodes reach TRL as NaN rewards with advantage 0; seed 0's train."""
    import math

    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset

    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func(
        register(), env_kwargs={**ECHO, "failing_seeds": (1,), "failures": 99}, max_tokens_per_turn=4, infra_retries=1
    )
    args = GRPOConfig(
        output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=40, max_steps=1, logging_steps=1, learning_rate=1e-3, seed=0, log_completions=False,
    )
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=args, train_dataset=episode_dataset(2),
        rollout_func=rollout, reward_funcs=rollout.reward_func,
    )
    try:
        trainer.train()
    finally:
        rollout.close()
    (logged,) = [entry for entry in trainer.state.log_history if "infra_failures" in entry]
    assert (logged["infra_failures"], logged["retries"], logged["dropped"]) == (4.0, 2.0, 2.0)
    assert InfraEcho.attempts == {0: 2, 1: 4}
    rewards = list(trainer._logs["rewards"]["env_reward"])
    advantages = list(trainer._logs["advantages"])
    dropped = [i for i, reward in enumerate(rewards) if math.isnan(reward)]
    assert len(dropped) == 2 and all(advantages[i] == 0.0 for i in dropped)
    assert [reward for reward in rewards if not math.isnan(reward)] == [2.0, 2.0]  # no 0 from the fault
    assert logged["reward"] == pytest.approx(2.0)  # the mean TRL logs leaves the dropped episodes out


def _factory_episode(failures, at):
    from wrappers.trl import environment_factory

    env_class = environment_factory(register(), env_kwargs={**ECHO, "failing_seeds": (11,), "failures": failures, "at": at})
    environment = env_class()
    first = environment.reset(prompt="Go.", seed=11)
    if not environment.done:
        environment.echo(message="hi")
    return environment, first


def test_environment_factory_replays_a_reset_that_failed_from_the_same_seed():
    environment, first = _factory_episode(failures=2, at="reset")
    assert InfraEcho.attempts[11] == 3 and "could not start" not in first
    assert (environment.trainable, environment.get_reward()) == (True, 1.0)


def test_environment_factory_gives_none_for_an_episode_that_infra_ended():
    for failures, at in ((99, "reset"), (1, "step")):  # every reset failed; the first step ended infra (no replay)
        environment, first = _factory_episode(failures, at)
        assert (environment.outcome, environment.get_reward()) == ("infra", None)
    assert "could not start" in _factory_episode(99, "reset")[1]


def test_an_agent_episode_that_infra_ended_is_not_trainable_and_a_model_ending_is():
    from gymenvs.core.outcomes import EndedBy, ending
    from wrappers.trl.rollout.agent import AgentEpisode

    infra, model = AgentEpisode(seed=0, prompt_ids=[1], messages=[]), AgentEpisode(seed=0, prompt_ids=[1], messages=[])
    infra.add_env_turn("", 0.0, False, True, ending(EndedBy.INFRA, "oom_killed", "killed"), None, 100)
    model.add_env_turn("", 0.0, True, False, ending(EndedBy.MODEL, "failed"), None, 100)
    assert (infra.trainable, infra.outcome, infra.outcome_reason) == (False, "infra", "oom_killed")
    assert (model.trainable, model.outcome_reason) == (True, "failed")
