"""make_rollout_func / EnvRollout: concurrent multi-turn episodes as tokens, logprobs and an env mask."""

import time

import gymnasium as gym
import pytest
import torch
from bridge_support import teacher_forced_logprobs

import gymenvs  # noqa: F401  (registers the envs)
from gymenvs.core import Outcome, TextEnv, tool
from gymenvs.envs.echo import EchoEnv
from wrappers.trl import EnvRollout, Sampling, TransformersGenerator, episode_seed, make_rollout_func
from wrappers.trl import evaluate_rollouts as evaluate
from wrappers.trl.rollout.transcript import ChatRenderer


def generator_for(model, tokenizer, temperature=1.0):
    return TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=temperature))


def test_logprobs_of_a_multi_turn_episode_equal_a_teacher_forced_forward_pass(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 3}, max_tokens_per_turn=6)
    torch.manual_seed(0)
    episodes = rollout.run(
        [[{"role": "user", "content": "Go."}]] * 3,
        generator_for(model, tokenizer, 0.8),
        tokenizer,
        max_completion_length=200,
    )
    rollout.close()
    for episode in episodes:
        assert episode.turns == 3 and episode.end_reason == "truncated"
        mask = torch.tensor(episode.env_mask, dtype=torch.bool)
        assert len(episode.completion_ids) == len(episode.logprobs) == len(mask)
        forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=0.8)
        sampled = torch.tensor(episode.logprobs)
        assert torch.allclose(sampled[mask], forward[mask], atol=1e-4, rtol=0)
        assert (sampled[~mask] == 0).all()
        assert 0 < mask.sum() < len(mask)  # model turns and env replies are interleaved


def test_env_tokens_are_exactly_the_rendered_env_replies_and_carry_env_mask_0(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 3}, max_tokens_per_turn=6)
    (episode,) = rollout.run(
        [[{"role": "user", "content": "Go."}]], generator_for(model, tokenizer), tokenizer, max_completion_length=200
    )
    rollout.close()
    renderer = ChatRenderer(tokenizer, rollout.tools)
    runs, current = [], []  # maximal runs of env-written tokens
    for token, mask in zip(episode.completion_ids, episode.env_mask):
        if mask == 0:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    replies = [message["content"] for message in episode.messages if message["role"] == "user"][1:]  # after the prompt
    assistant = [message for message in episode.messages if message["role"] == "assistant"]
    assert len(runs) == 2  # turns 1 and 2 get a reply in tokens; the last observation ends the episode
    for run, reply, said in zip(runs, replies, assistant):
        expected = renderer.reply_ids(reply, said, tokenizer.eos_token_id)
        assert run[-len(expected) :] == expected
        assert run[: len(run) - len(expected)] in (
            [],
            [tokenizer.eos_token_id],
        )  # a turn cut at its cap is closed by the env
    assert replies[:2] == [message["content"] for message in assistant[:2]]  # Echo's replies are the model's own words


def test_invalid_tool_calls_get_the_env_error_observation_and_the_episode_goes_on(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer  # a random model: its turns are not valid guesses
    rollout = make_rollout_func("gymenvs/Wordle-v0", max_tokens_per_turn=8)
    episodes = rollout.run(["Play."] * 2, generator_for(model, tokenizer), tokenizer, max_completion_length=400)
    rollout.close()
    for episode in episodes:
        assert episode.turns >= 2
        env_replies = [message["content"] for message in episode.messages[2:] if message["role"] != "assistant"]
        assert env_replies and all(reply.startswith("Invalid action") for reply in env_replies)


def test_every_episode_respects_max_completion_length_and_ends_cleanly(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 50})
    episodes = rollout.run(["Go."] * 4, generator_for(model, tokenizer), tokenizer, max_completion_length=40)
    rollout.close()
    for episode in episodes:
        assert len(episode.completion_ids) <= 40
        assert episode.end_reason == "max_completion_length"
        assert episode.env_mask[-1] == 1  # ends on a model token: no dangling env reply


def test_group_members_start_from_the_same_state_and_groups_differ(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    prompts = [
        [{"role": "user", "content": f"Episode {i}."}] for i in range(4) for _ in range(3)
    ]  # as TRL repeats them
    rollout = make_rollout_func("gymenvs/Catch-v0", env_kwargs={"columns": 50}, max_tokens_per_turn=4)
    episodes = rollout.run(prompts, generator_for(model, tokenizer), tokenizer, max_completion_length=30)
    rollout.close()
    first_observations = [episode.messages[0]["content"] for episode in episodes]
    for group in range(4):
        members = episodes[3 * group : 3 * group + 3]
        assert len({tuple(member.prompt_ids) for member in members}) == 1
    assert len(set(first_observations)) > 1
    reference = gym.make("gymenvs/Catch-v0", columns=50)
    observation, _ = reference.reset(seed=episode_seed({"prompt": prompts[0]}))
    assert first_observations[0].endswith(observation)


class FlakyEcho(EchoEnv):
    """Echo that crashes, or hangs, on its second step when the episode's seed is odd."""

    def __init__(self, failure="crash", **kwargs):
        super().__init__(**kwargs)
        self.failure = failure
        self._odd = False

    def reset(self, *, seed=None, options=None):
        self._odd = bool(seed % 2)
        if self._odd and self.failure == "reset":
            raise RuntimeError("no sandbox could start")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self._odd and self._step_count == 1:
            if self.failure == "crash":
                raise RuntimeError("the sandbox died")
            time.sleep(2)
        return super().step(action)


@pytest.fixture
def flaky_echo():
    gym.register("gymenvs_tests/FlakyEcho-v0", entry_point=FlakyEcho)
    yield "gymenvs_tests/FlakyEcho-v0"
    del gym.registry["gymenvs_tests/FlakyEcho-v0"]


@pytest.mark.parametrize("failure", ["crash", pytest.param("hang", marks=pytest.mark.slow)])
def test_an_env_that_fails_mid_rollout_ends_only_its_own_episode(model_and_tokenizer, flaky_echo, failure):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func(
        flaky_echo, env_kwargs={"max_turns": 3, "failure": failure}, max_tokens_per_turn=4, step_timeout_s=0.5
    )
    episodes = rollout.run(
        ["Go."] * 4, generator_for(model, tokenizer), tokenizer, seeds=[10, 11, 12, 13], max_completion_length=100
    )
    rollout.close()
    for episode in episodes[::2]:  # even seeds: untouched
        assert (episode.end_reason, episode.turns, episode.reward, episode.error) == ("truncated", 3, 3.0, None)
    for episode in episodes[1::2]:  # odd seeds: the second step failed, every time it was replayed
        assert (episode.end_reason, episode.turns, episode.reward) == ("env_error", 2, 0.0)
        assert (episode.outcome, episode.trainable, episode.retries) == ("infra", False, 2)
        assert ("the sandbox died" if failure == "crash" else "timed out") in episode.error


def test_an_env_that_fails_to_reset_ends_only_its_own_episode(model_and_tokenizer, flaky_echo):
    model, tokenizer = model_and_tokenizer
    rollout = make_rollout_func(flaky_echo, env_kwargs={"max_turns": 2, "failure": "reset"}, max_tokens_per_turn=4)
    episodes = rollout.run(
        ["Go."] * 2, generator_for(model, tokenizer), tokenizer, seeds=[10, 11], max_completion_length=100
    )
    rollout.close()
    assert (episodes[0].end_reason, episodes[0].turns, episodes[0].reward) == ("truncated", 2, 2.0)
    failed = episodes[1]
    assert (failed.end_reason, failed.turns, failed.reward, failed.outcome) == ("env_error", 0, 0.0, "infra")
    assert "no sandbox could start" in failed.error
    # Trainers need a completion: one end-of-turn token that nothing is trained on.
    assert (failed.completion_ids, failed.env_mask, failed.logprobs) == ([tokenizer.eos_token_id], [0], [0.0])


def test_evaluate_returns_transcripts_and_rewards_without_a_trainer(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    episodes = evaluate(
        "gymenvs/Echo-v0",
        generator_for(model, tokenizer),
        tokenizer,
        num_episodes=3,
        seed=5,
        env_kwargs={"max_turns": 2},
        max_tokens_per_turn=4,
        max_completion_length=60,
    )
    assert [episode.seed for episode in episodes] == [5, 6, 7]
    for episode in episodes:
        assert episode.reward == 2.0
        assert [message["role"] for message in episode.messages] == ["user", "assistant", "user", "assistant", "user"]


# -- bad input: clear errors before any episode starts ------------------------------------


def test_an_unregistered_env_id_is_rejected():
    with pytest.raises(ValueError, match="'gymenvs/Nope-v0' is not registered"):
        make_rollout_func("gymenvs/Nope-v0")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"backend": "gpu"}, r"backend='gpu': Value error, expected one of \['process', 'ray', 'thread'\]"),
        ({"vector_kwargs": {"address": "auto"}}, r"address='auto': not a setting of this backend.*pin_threads"),
        ({"backend": "ray", "vector_kwargs": {"num_cpus": -1}}, r"num_cpus=-1"),
        ({"vector_kwargs": {"backend": "ray"}}, r"give backend as keyword\(s\) of their own"),
    ],
)
def test_bad_vector_settings_are_rejected_at_construction(options, message):
    with pytest.raises(ValueError, match=message):
        make_rollout_func("gymenvs/Echo-v0", **options)


def test_vector_kwargs_reach_the_vector_env():
    rollout = make_rollout_func("gymenvs/Echo-v0", vector_kwargs={"dedicated_threads": True})
    try:
        vector_env = rollout._vector_env_for("gymenvs/Echo-v0", 2)
        assert type(vector_env._backend).__name__ == "DedicatedThreadBackend"
    finally:
        rollout.close()


class ButtonEnv(TextEnv):
    """An env that reads tool calls only (no free text)."""

    def _start_episode(self, options):
        return "Press the button."

    @tool
    def press(self) -> Outcome:
        """Press the button."""
        return Outcome("Pressed.", reward=1.0, terminated=True)


@pytest.fixture
def button_env():
    gym.register("gymenvs_tests/Button-v0", entry_point=ButtonEnv)
    yield "gymenvs_tests/Button-v0"
    del gym.registry["gymenvs_tests/Button-v0"]


def test_a_max_completion_length_too_small_for_one_turn_is_rejected_at_construction(model_and_tokenizer, button_env):
    _, tokenizer = model_and_tokenizer
    with pytest.raises(
        ValueError, match=r"max_completion_length=8 is too small for one turn of gymenvs_tests/Button-v0.*press"
    ):
        make_rollout_func(button_env, tokenizer=tokenizer, max_completion_length=8)
    with pytest.raises(ValueError, match=r"max_completion_length=1 is too small for one turn of gymenvs/Wordle-v0"):
        make_rollout_func("gymenvs/Wordle-v0", tokenizer=tokenizer, max_completion_length=1)
    make_rollout_func("gymenvs/Wordle-v0", tokenizer=tokenizer, max_completion_length=2)  # free text: one token will do


def test_a_max_completion_length_too_small_is_rejected_before_the_first_episode(model_and_tokenizer, button_env):
    model, tokenizer = model_and_tokenizer
    rollout = EnvRollout(button_env)
    with pytest.raises(ValueError, match="too small for one turn"):
        rollout.run(["Play."], generator_for(model, tokenizer), tokenizer, max_completion_length=8)
    assert rollout._vector_envs == {}  # no env was started


@pytest.mark.parametrize("option", [{"max_tokens_per_turn": 0}, {"max_completion_length": -3}])
def test_non_positive_lengths_are_rejected(option):
    with pytest.raises(ValueError, match="expected a positive integer"):
        make_rollout_func("gymenvs/Echo-v0", **option)


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")  # from trl 1.16
def test_as_a_rollout_func_it_samples_from_the_trainers_model_with_matching_logprobs(model_and_tokenizer, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import episode_dataset

    model, tokenizer = model_and_tokenizer
    # A template variable, as GRPOConfig(chat_template_kwargs={"enable_thinking": False}) sets Qwen3's.
    tokenizer.chat_template = "{% if greeting is defined %}{{ greeting }}{% endif %}" + tokenizer.chat_template
    rollout = make_rollout_func("gymenvs/Echo-v0", env_kwargs={"max_turns": 2}, max_tokens_per_turn=5)
    config = GRPOConfig(
        output_dir=str(tmp_path),
        bf16=False,
        use_cpu=True,
        report_to="none",
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=64,
        temperature=0.7,
        max_steps=1,
        chat_template_kwargs={"greeting": "Hello there."},
    )
    dataset = episode_dataset(4)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=dataset,
        rollout_func=rollout,
        reward_funcs=rollout.reward_func,
    )
    output = rollout([row["prompt"] for row in dataset for _ in range(2)], trainer)
    rollout.close()
    assert set(output) == {
        "prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "env_turns", "env_seed", "env_outcome",
        "env_retries",
    }
    assert output["env_outcome"] == ["model"] * 8 and output["env_retries"] == [0] * 8
    assert output["env_reward"] == [2.0] * 8 and output["env_turns"] == [2] * 8
    assert all(tokenizer.decode(ids).startswith("Hello there.") for ids in output["prompt_ids"])  # trainer's kwargs
    for prompt_ids, completion_ids, logprobs, env_mask in zip(
        output["prompt_ids"], output["completion_ids"], output["logprobs"], output["env_mask"]
    ):
        mask = torch.tensor(env_mask, dtype=torch.bool)
        forward = teacher_forced_logprobs(trainer.model, prompt_ids, completion_ids, temperature=0.7)
        assert torch.allclose(torch.tensor(logprobs)[mask], forward[mask], atol=1e-4, rtol=0)
