"""Training through agent episodes: make_rollout_func on gymenvs/SWEAgent-v0, with the real tiny model."""

from __future__ import annotations

import os

import pytest

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
import torch
from container.agent.agent_support import forgetful_agent, wire_agent  # noqa: E402
from swe.swe_support import FIXTURE_IDS  # noqa: E402

from tests.trl.bridge_support import teacher_forced_logprobs  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny():
    from wrappers.trl.extras.tiny_model import tiny_model

    return tiny_model(seed=0)


class RecordingGenerator:
    """The real transformers generator, keeping every completion it sampled."""

    def __init__(self, model, tokenizer, temperature=1.0):
        from wrappers.trl import Sampling, TransformersGenerator

        self.inner = TransformersGenerator(model, pad_token_id=tokenizer.pad_token_id, sampling=Sampling(temperature=temperature))
        self.sampled: list[list[int]] = []

    def generate(self, prompts, max_tokens):
        completions = self.inner.generate(prompts, max_tokens)
        self.sampled.extend(completion.token_ids for completion in completions)
        return completions


def test_reference_agent_episode_tokens_logprobs_and_env_mask(swe_images, tiny):
    from wrappers.trl import make_rollout_func
    from wrappers.trl.rollout.agent import AgentRollout

    model, tokenizer = tiny
    generator = RecordingGenerator(model, tokenizer, temperature=0.8)
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={"max_turns": 4, "instance_ids": [FIXTURE_IDS[0]]},
                                max_tokens_per_turn=12)
    assert isinstance(rollout, AgentRollout)
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=600)
    finally:
        rollout.close()
    assert episode.turns == 4 and episode.end_reason == "truncated" and episode.history_rewrites == 0
    assert rollout.metrics["requests"] == 4  # every request was a generation request
    # The prompt is the agent's own first request, rendered with its tools.
    prompt = tokenizer.decode(episode.prompt_ids)
    assert "You are an autonomous software engineer" in prompt and '"name": "submit"' in prompt
    # Logprobs: the sampling policy's, equal to a teacher-forced forward pass over the whole episode.
    mask = torch.tensor(episode.env_mask, dtype=torch.bool)
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=0.8)
    sampled = torch.tensor(episode.logprobs)
    assert torch.allclose(sampled[mask], forward[mask], atol=1e-4, rtol=0)
    assert (sampled[~mask] == 0).all()
    # env_mask is 1 exactly on the sampled tokens; the agent's messages and the template's are 0.
    model_tokens = [t for t, m in zip(episode.completion_ids, episode.env_mask) if m]
    assert model_tokens == [t for completion in generator.sampled for t in completion]
    env_text = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    assert env_text.count("No tool call found") == 3 and env_text.count("<|im_start|>assistant") == 3


def test_a_rewritten_history_starts_a_new_sequence_and_is_counted(swe_images, tiny):
    from wrappers.trl import make_rollout_func
    from wrappers.trl.rollout.agent import request_prompt_ids
    from wrappers.trl.rollout.transcript import ChatRenderer

    model, tokenizer = tiny
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={"agent": forgetful_agent(), "instance_ids": [FIXTURE_IDS[0]]},
                                max_tokens_per_turn=8)
    try:
        (episode,) = rollout.run([""], RecordingGenerator(model, tokenizer), tokenizer, seeds=[0], max_completion_length=400)
    finally:
        rollout.close()
    assert episode.end_reason == "terminated" and episode.turns == 4
    assert episode.history_rewrites == 1 and rollout.metrics["history_rewrites"] == 1 and len(episode.sequences) == 1
    rewritten = [{"role": "system", "content": "You are terse."},
                 {"role": "user", "content": "Summary so far: two replies. Say more."}]
    assert episode.prompt_ids == request_prompt_ids(ChatRenderer(tokenizer, None), {"messages": rewritten})
    first = episode.sequences[0]
    assert sum(first["env_mask"]) > 0 and "More." in tokenizer.decode(first["completion_ids"])


def test_a_grpo_step_on_cpu_through_the_reference_agent(swe_images, tiny, tmp_path):
    import copy

    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset, make_rollout_func

    model, tokenizer = copy.deepcopy(tiny[0]), tiny[1]
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={"max_turns": 2, "instance_ids": [FIXTURE_IDS[0]]},
                                max_tokens_per_turn=8)
    config = GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=160, max_steps=1)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=episode_dataset(2),
                          rollout_func=rollout, reward_funcs=rollout.reward_func)
    try:
        trainer.train()
    finally:
        rollout.close()
    # A random model resolves nothing: both rewards are 0, so the step's advantage (and update) is zero.
    assert trainer.state.global_step == 1 and rollout.metrics["episodes"] == 2 and rollout.metrics["requests"] == 4
    for episode in rollout.last_episodes:
        assert episode.turns == 2 and episode.end_reason == "truncated" and "step limit" in episode.error


class PromptRecorder:
    """A generator keeping every prompt it was asked to answer."""

    def __init__(self, inner):
        self.inner, self.prompts = inner, []

    def generate(self, prompts, max_tokens):
        self.prompts.extend(list(prompt) for prompt in prompts)
        return self.inner.generate(prompts, max_tokens)


@pytest.mark.parametrize("wire", ["chat", "responses", "anthropic"])
def test_side_calls_never_reach_the_generator_nor_become_training_tokens(swe_images, tiny, wire):
    """The wire test agent makes its side calls (a title on the side model; Responses: a Codex-style compaction;
    Anthropic: a token count) before its first main turn, and stops at an error, so its main turns prove they were
    answered; none of them may be a generation request or leave text in the episode's tokens."""
    import json

    from tests.trl.rollout.forcing_support import ForcingGenerator
    from wrappers.trl import make_rollout_func

    model, tokenizer = tiny
    call = {"name": "bash", "arguments": {"command": "echo main-$((6 * 7))"}}
    generator = PromptRecorder(ForcingGenerator(None, model, tokenizer, [f"<tool_call>{json.dumps(call)}</tool_call>", "Done."],
                                                temperature=1.0))
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", max_tokens_per_turn=48,
                                env_kwargs={"agent": wire_agent(wire), "instance_ids": [FIXTURE_IDS[0]], "call_timeout_s": 60.0})
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=800)
    finally:
        rollout.close()
    assert episode.end_reason == "terminated" and episode.turns == 2, (episode.end_reason, episode.error)
    # The generator got the two main turns only: the first request, then that request extended by the tool result.
    assert len(generator.prompts) == 2 and episode.requests == 2 and rollout.metrics["requests"] == 2
    assert generator.prompts[0] == episode.prompt_ids
    assert generator.prompts[1] == (episode.prompt_ids + episode.completion_ids)[:len(generator.prompts[1])]
    assert "main-42" in tokenizer.decode(generator.prompts[1]) and episode.sequences == []
    side_text = "Generate a title for this conversation"
    assert not any(side_text in tokenizer.decode(prompt) for prompt in generator.prompts)
    assert side_text not in tokenizer.decode(episode.prompt_ids) + tokenizer.decode(episode.completion_ids)
    assert [sequence["prompt_ids"] for sequence in episode.token_sequences()] == [episode.prompt_ids]
