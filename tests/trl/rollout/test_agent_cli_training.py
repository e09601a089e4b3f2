"""Training through the coding-agent CLIs: `make_rollout_func` on SWEAgent-v0 with Claude Code (Anthropic
Messages) and Codex (Responses), the real tiny model, real containers, CPU.

A random model almost never writes a tool call, and each CLI ends its run at the first reply without
one; so the first turns' completions are a forced call of the agent's own shell tool (real token ids,
scored by the real model as if sampled) and the last one is sampled. The episodes are therefore
multi-turn, with the tool results the agent inserts between the model's turns.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
import torch  # noqa: E402
from container.agent.cli_support import CLIS, FIXTURES, gold_patch_call  # noqa: E402

from tests.trl.bridge_support import teacher_forced_logprobs  # noqa: E402
from tests.trl.rollout.forcing_support import (  # noqa: E402
    FORCED_TURNS,
    TEMPERATURE,
    FirstSolvesGenerator,
    forcing_generator,
    shell_texts,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def tiny():
    from wrappers.trl.extras.tiny_model import tiny_model

    return tiny_model(seed=0)


@pytest.fixture(scope="module")
def rollouts(swe_images):
    """One rollout func per agent, shared by the tests (each keeps its env, and so its warm container set-up)."""
    from wrappers.trl import make_rollout_func

    made = {agent: make_rollout_func("gymenvs/SWEAgent-v0", max_tokens_per_turn=48,
                                     env_kwargs={"agent": agent, "instance_ids": [FIXTURES[0]],
                                                 "max_turns": FORCED_TURNS + 1, "call_timeout_s": 120.0})
            for agent in ("claude-code", "codex")}
    yield made
    for rollout in made.values():
        rollout.close()


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_multi_turn_cli_episode_has_the_models_logprobs_and_env_mask(rollouts, tiny, agent):
    model, tokenizer = tiny
    generator = forcing_generator(model, tokenizer, agent)
    rollout = rollouts[agent]
    (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=1200)
    assert episode.turns == FORCED_TURNS + 1 and episode.history_rewrites == 0, (episode.end_reason, episode.error)
    assert episode.requests == FORCED_TURNS + 1 and len(episode.sequences) == 0
    assert CLIS[agent].system_prompt in tokenizer.decode(episode.prompt_ids)
    # Logprobs: the sampling policy's, equal to one teacher-forced forward pass over the whole episode
    # (so every turn's prompt was the episode so far, token for token).
    mask = torch.tensor(episode.env_mask, dtype=torch.bool)
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids, temperature=TEMPERATURE)
    sampled = torch.tensor(episode.logprobs)
    assert torch.allclose(sampled[mask], forward[mask], atol=1e-4, rtol=0), (sampled[mask] - forward[mask]).abs().max()
    assert (sampled[~mask] == 0).all()
    # env_mask is 1 exactly on the tokens the generator returned; the tool results the agent inserted are 0.
    assert [t for t, m in zip(episode.completion_ids, episode.env_mask) if m] == [t for c in generator.sampled for t in c]
    env_text = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    model_text = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if m])
    for turn in range(1, 1 + FORCED_TURNS):
        assert f"marker-{6 * turn}" in env_text and f"marker-{6 * turn}" not in model_text
        assert f"marker-$((6 * {turn}))" in model_text
    assert env_text.count("<|im_start|>assistant") == FORCED_TURNS


def test_a_grpo_step_on_cpu_through_codex(rollouts, tiny, tmp_path, monkeypatch):
    from trl import GRPOConfig, GRPOTrainer

    from wrappers.trl import CPU_TRAINING_ARGS, episode_dataset
    from wrappers.trl.generation.trainer import generator_from_trainer

    model, tokenizer = copy.deepcopy(tiny[0]), tiny[1]
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    rollout = rollouts["codex"]
    config = GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                        max_completion_length=1200, max_steps=1, gradient_checkpointing=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=episode_dataset(2),
                          rollout_func=rollout, reward_funcs=rollout.reward_func)
    # One episode of the group applies the gold patch through Codex's shell (reward 1), the other echoes (reward 0):
    # the group's advantages are non-zero, so the step updates the model.
    gold_text = f"<tool_call>{json.dumps(gold_patch_call(CLIS['codex'], FIXTURES[0]))}</tool_call>"
    monkeypatch.setattr(rollout, "_generator_for", lambda trainer: FirstSolvesGenerator(
        generator_from_trainer(trainer), trainer.model, tokenizer, shell_texts("codex", 1), config.temperature,
        gold_text=gold_text))
    episodes_before = rollout.metrics["episodes"]
    trainer.train()
    assert trainer.state.global_step == 1 and rollout.metrics["episodes"] == episodes_before + 2
    # One forced shell call, then a sampled reply without one, which ends Codex's run: two main turns each.
    episodes = sorted(rollout.last_episodes, key=lambda episode: episode.reward)
    assert [episode.reward for episode in episodes] == [0.0, 1.0], [(e.reward, e.end_reason, e.error) for e in episodes]
    for episode in episodes:
        assert episode.turns == 2 and episode.end_reason == "terminated", (episode.end_reason, episode.error)
        assert 0 < sum(episode.env_mask) < len(episode.env_mask)
    assert "marker-6" in tokenizer.decode(episodes[0].completion_ids)
    assert "git apply /tmp/gold.patch" in tokenizer.decode(episodes[1].completion_ids)
    assert any(not torch.equal(before[name], parameter) for name, parameter in model.named_parameters())
