"""Agent CLIs trained through other model families' templates: `make_rollout_func` on SWEAgent-v0, the policy's
side rendered and read with Llama 3.1's, gpt-oss's or Qwen3's real template (tiny tokenizers built offline,
wrappers/trl/extras/tiny_families.py), real containers, the tiny model on CPU.

The model's turns are written in the family's dialect: a call of the agent's own shell tool (two at once, after a
thought, for the parallel case), then a plain reply, which ends the CLI's run. Each must reach the agent as what it
is (the commands run: their markers come back in the tool results), and the episode must be token-exact: logprobs
equal to one forward pass over the sequence, `env_mask` 1 exactly on the sampled tokens, and the tool results the
agent inserted rendered as the family's template renders them.
"""

from __future__ import annotations

import pytest
from container.agent.cli_support import CLIS, FIXTURES

from tests.trl.bridge_support import env_runs, teacher_forced_logprobs

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CASES = {  # (agent, family, parallel calls after a thought)
    "codex through llama3_1": ("codex", "llama3_1", False),
    "claude-code through gptoss": ("claude-code", "gptoss", False),
    "claude-code through qwen3, parallel calls and reasoning": ("claude-code", "qwen3", True),
}


def scripted_turns(tokenizer, agent: str, parallel: bool, template: str | None) -> list[list[int]]:
    from wrappers.trl.extras.tiny_families import model_turn_text

    cli = CLIS[agent]
    commands = ["echo marker-$((6 * 1))", "echo marker-$((6 * 2))"] if parallel else ["echo marker-$((6 * 1))"]
    calls = [{"type": "function", "function": cli.shell(command)} for command in commands]
    call_turn = {"role": "assistant", "content": "", "tool_calls": calls}
    if parallel:
        call_turn["reasoning_content"] = "Two markers at once."
    results = [{"role": "tool", "name": cli.shell_tool, "content": "ok"} for _ in calls]
    reply = {"role": "assistant", "content": "All done."}
    texts = [model_turn_text(tokenizer, call_turn, commands[-1].split("*")[-1], results, template),
             model_turn_text(tokenizer, reply, "All done.", [{"role": "user", "content": "Next."}], template)]
    return [tokenizer.encode(text, add_special_tokens=False) for text in texts]


@pytest.fixture(scope="module", params=list(CASES))
def played(request, swe_images):
    from wrappers.trl import make_rollout_func
    from wrappers.trl.extras.tiny_families import ScriptedTurns, family_model, family_tokenizer
    from wrappers.trl.rollout.transcript import training_template

    agent, family, parallel = CASES[request.param]
    tokenizer = family_tokenizer(family)
    model = family_model(tokenizer)
    generator = ScriptedTurns(model, scripted_turns(tokenizer, agent, parallel, training_template(tokenizer)))
    rollout = make_rollout_func("gymenvs/SWEAgent-v0", env_kwargs={
        "agent": agent, "instance_ids": [FIXTURES[0]], "max_turns": 3, "call_timeout_s": 120.0})
    try:
        (episode,) = rollout.run([""], generator, tokenizer, seeds=[0], max_completion_length=6000)
    finally:
        rollout.close()
    return tokenizer, model, generator, episode, parallel


def test_the_calls_reach_the_agent_and_its_results_come_back(played):
    tokenizer, _, _, episode, parallel = played
    assert episode.turns == 2 and episode.end_reason == "terminated" and episode.history_rewrites == 0, episode.error
    env_text = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask) if not m])
    markers = ["marker-6", "marker-12"] if parallel else ["marker-6"]
    assert all(marker in env_text for marker in markers)
    said = [message for message in episode.messages if message["role"] == "assistant" and message.get("tool_calls")]
    assert len(said[-1]["tool_calls"]) == len(markers)
    if parallel:
        assert said[-1]["reasoning_content"].strip() == "Two markers at once."


def test_the_episode_is_token_exact_in_the_familys_template(played):
    from wrappers.trl.rollout.transcript import training_template

    tokenizer, model, generator, episode, _ = played
    sampled = [t for t, m in zip(episode.completion_ids, episode.env_mask) if m]
    assert sampled == [t for turn in generator.sampled for t in turn]
    forward = teacher_forced_logprobs(model, episode.prompt_ids, episode.completion_ids).tolist()
    assert max(abs(lp - forward[i]) for i, (lp, m) in enumerate(zip(episode.logprobs, episode.env_mask)) if m) < 1e-4
    runs = env_runs(episode)
    model_turns = [i for i, message in enumerate(episode.messages) if message["role"] == "assistant"]
    # the messages after the first model turn, up to the next: the tool results the agent inserted
    (run,) = runs
    results = episode.messages[: model_turns[-1]]
    calls = episode.messages[model_turns[-2]]["tool_calls"]
    assert [message["role"] for message in results[model_turns[-2] + 1 :]] == ["tool"] * len(calls)
    rendered = tokenizer.apply_chat_template(results, add_generation_prompt=True, tokenize=False,
                                             chat_template=training_template(tokenizer))
    assert rendered.endswith(tokenizer.decode(run))
