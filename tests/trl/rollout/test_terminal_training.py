"""Training on Harbor tasks: make_rollout_func and environment_factory on gymenvs/Terminal-v0, with the real tiny model."""

from __future__ import annotations

import copy

import pytest
import torch  # offline: tests/trl/conftest.py set HF_HUB_OFFLINE and the rest before this import

from tests.trl.bridge_support import teacher_forced_logprobs

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TASK = "gymenvs/csv-report"
#: A solution as one bash command: the policy's free text is run as bash.
GOLD = "mkdir -p /app/out && echo 7 > /app/out/count.txt && echo 497.74 > /app/out/total.txt && echo bob > /app/out/top.txt"


@pytest.fixture
def tiny(_tiny):
    """The session's tiny model (`_tiny`, tests/conftest.py: tiny_model(seed=0)); copied before any training."""
    return _tiny


class Recording:
    """A generator that keeps each completion it returned: the real sampler, or a fixed text."""

    def __init__(self, inner=None, text=None, tokenizer=None):
        self.inner, self.text, self.tokenizer = inner, text, tokenizer
        self.sampled: list[list[int]] = []

    def generate(self, prompts, max_tokens):
        from wrappers.trl import Completion

        if self.inner is not None:
            completions = self.inner.generate(prompts, max_tokens)
        else:
            end_of_turn = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
            ids = self.tokenizer.encode(self.text, add_special_tokens=False) + [end_of_turn]
            completions = [Completion(ids, [0.0] * len(ids), "stop") for _ in prompts]
        self.sampled.extend(completion.token_ids for completion in completions)
        return completions


def play(tokenizer, generator, max_turns):
    from wrappers.trl import make_rollout_func

    rollout = make_rollout_func("gymenvs/Terminal-v0", env_kwargs={"max_turns": max_turns, "instance_ids": [TASK]},
                                max_tokens_per_turn=16)
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=2000)
    finally:
        rollout.close()
    return episode


def test_sampled_tokens_and_logprobs_are_exact(terminal_images, tiny):
    from wrappers.trl import Sampling, TransformersGenerator

    model, tokenizer = tiny
    generator = Recording(TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=0.8)))
    episode = play(tokenizer, generator, max_turns=2)
    assert episode.turns == 2 and episode.outcome == "model" and episode.reward == 0.0
    assert "/app/sales.csv" in tokenizer.decode(episode.prompt_ids) and '"name": "bash"' in tokenizer.decode(episode.prompt_ids)
    mask = torch.tensor(episode.env_mask, dtype=torch.bool)
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=0.8)
    assert torch.allclose(torch.tensor(episode.logprobs)[mask], forward[mask], atol=1e-4, rtol=0)
    assert [t for t, m in zip(episode.completion_ids, episode.env_mask) if m] == [t for c in generator.sampled for t in c]


def test_a_solving_completion_earns_the_task_reward(terminal_images, tiny):
    _, tokenizer = tiny
    generator = Recording(text=GOLD, tokenizer=tokenizer)
    episode = play(tokenizer, generator, max_turns=1)
    assert (episode.reward, episode.outcome, episode.outcome_reason) == (1.0, "model", "solved")
    assert [t for t, m in zip(episode.completion_ids, episode.env_mask) if m] == generator.sampled[0]


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_environment_factory_trains_one_step(terminal_images, tiny, tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset

    model, tokenizer = copy.deepcopy(tiny[0]), tiny[1]  # trained here: the module's other tests keep the untrained model
    Environment = environment_factory("gymenvs/Terminal-v0", max_turns=1, instance_ids=[TASK], command_timeout_s=10.0)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, environment_factory=Environment, train_dataset=episode_dataset(2),
        args=GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=16, max_steps=1, max_tool_calling_iterations=1),
    )
    try:
        trainer.train()
        assert trainer.state.global_step == 1
        assert [environment.get_reward() for environment in trainer.environments] == [0.0, 0.0]
    finally:
        for environment in trainer._environment_pool[None]:
            environment._close()


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_environment_factory_a_completion_calling_bash_with_the_oracle_earns_one(terminal_images, tiny, tmp_path):
    """The tiny model taught (supervised steps) to answer the first prompt with the oracle as one `bash` call:
    the call TRL parses from the sampled completion runs in the task's container and the grading gives 1."""
    import json

    from trl import GRPOConfig, GRPOTrainer

    from tests.trl.bridge_support import render_prompt
    from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset
    from wrappers.trl.extras.tiny_model import imitate

    model, tokenizer = copy.deepcopy(tiny[0]), tiny[1]
    Environment = environment_factory("gymenvs/Terminal-v0", max_turns=1, instance_ids=[TASK], command_timeout_s=10.0)
    dataset = episode_dataset(2)
    probe = Environment()
    try:
        observation = probe.reset(**dataset[0])
        tools = [getattr(probe, name) for name in sorted(type(probe.env.unwrapped).tools)]  # as TRL lists them
    finally:
        probe._close()
    prompt = [dict(dataset[0]["prompt"][0]), {"role": "user", "content": observation}]
    call = f"<tool_call>\n{json.dumps({'name': 'bash', 'arguments': {'command': GOLD}})}\n</tool_call>"
    imitate(model, tokenizer, [render_prompt(tokenizer, prompt, tools)], [call])
    torch.manual_seed(0)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, environment_factory=Environment, train_dataset=dataset,
        args=GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=160, max_steps=1, max_tool_calling_iterations=1, temperature=0.1),
    )
    try:
        trainer.train()
        assert trainer.state.global_step == 1
        rewards = [environment.get_reward() for environment in trainer.environments]
        assert 1.0 in rewards and set(rewards) <= {0.0, 1.0}, rewards  # a sample may still stray from the taught call
    finally:
        for environment in trainer._environment_pool[None]:
            environment._close()


def test_a_cli_agents_tokens_and_logprobs_are_exact_on_a_terminal_task(terminal_images, tiny, runtime):
    """Codex on a Harbor task through make_rollout_func: forced shell calls (scored by the model) then a sample,
    as tests/trl/rollout/test_agent_cli_training.py does on SWE tasks."""
    from gymenvs.container.agent.install import install_agent
    from gymenvs.container.agent.specs import agent_spec
    from tests.trl.rollout.forcing_support import FORCED_TURNS, TEMPERATURE, forcing_generator
    from wrappers.trl import make_rollout_func

    model, tokenizer = tiny
    install_agent(runtime, agent_spec("codex"), [terminal_images["gymenvs/edit-config"]], progress=False)
    generator = forcing_generator(model, tokenizer, "codex")
    rollout = make_rollout_func("gymenvs/TerminalAgent-v0", max_tokens_per_turn=48, env_kwargs={
        "agent": "codex", "instance_ids": ["gymenvs/edit-config"], "max_turns": FORCED_TURNS + 1, "call_timeout_s": 120.0})
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=1200)
    finally:
        rollout.close()
    assert episode.turns == FORCED_TURNS + 1 and episode.outcome == "model", (episode.end_reason, episode.error)
    assert "running in the Codex CLI" in tokenizer.decode(episode.prompt_ids)
    mask = torch.tensor(episode.env_mask, dtype=torch.bool)
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=TEMPERATURE)
    assert torch.allclose(torch.tensor(episode.logprobs)[mask], forward[mask], atol=1e-4, rtol=0)
    assert [t for t, m in zip(episode.completion_ids, episode.env_mask) if m] == [t for c in generator.sampled for t in c]
    env_text = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    assert all(f"marker-{6 * turn}" in env_text for turn in range(1, 1 + FORCED_TURNS))


def test_the_agent_variant_trains_through_the_agent_rollout(terminal_images, tiny):
    from wrappers.trl import Sampling, TransformersGenerator, make_rollout_func
    from wrappers.trl.rollout.agent import AgentRollout

    model, tokenizer = tiny
    generator = Recording(TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=0.8)))
    rollout = make_rollout_func("gymenvs/TerminalAgent-v0", env_kwargs={"max_turns": 2, "instance_ids": [TASK]},
                                max_tokens_per_turn=12)
    assert isinstance(rollout, AgentRollout)
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=800)
    finally:
        rollout.close()
    assert episode.turns == 2 and episode.outcome == "model" and episode.reward == 0.0
    assert "autonomous agent working in a Linux container, in /app" in tokenizer.decode(episode.prompt_ids)
    mask = torch.tensor(episode.env_mask, dtype=torch.bool)
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=0.8)
    assert torch.allclose(torch.tensor(episode.logprobs)[mask], forward[mask], atol=1e-4, rtol=0)
