"""`environment_factory` through other model families' templates: TRL's own tool loop, with Llama 3.1's and gpt-oss's
real templates (tiny tokenizers built offline, wrappers/trl/extras/tiny_families.py), calls gymenvs' tools.

TRL parses a family's calls with its response parser (`add_response_schema`), as gymenvs' rollouts do; the model is
taught the family's call in a few supervised steps (a random model never writes one), then trains for a step. The
call must reach the env as a call of its tool, and TRL must count it.
"""

from __future__ import annotations

import pytest
from trl import GRPOConfig, GRPOTrainer

from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")]


@pytest.mark.parametrize("family", ["llama3_1", "gptoss"])
def test_trls_tool_loop_reads_the_familys_calls_and_gymenvs_runs_them(tmp_path, family):
    from wrappers.trl.extras.tiny_families import family_model, family_tokenizer, tool_call_turns
    from wrappers.trl.extras.tiny_model import imitate

    tokenizer = family_tokenizer(family)
    Wordle = environment_factory("gymenvs/Wordle-v0", words=["crane", "slate"])
    probe = Wordle()
    observation = probe.reset(prompt=[{"role": "user", "content": ""}], seed=0)
    tools = [getattr(probe, name) for name in sorted(type(probe.env.unwrapped).tools)]  # as TRL lists them
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": observation}], tools=tools,
                                           add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    (call,) = tool_call_turns(tokenizer, "guess", "word", ["crane"])
    text = tokenizer.decode(call).removesuffix(tokenizer.eos_token)  # imitate ends the turn with the eos token
    model = imitate(family_model(tokenizer), tokenizer, [prompt], [text], steps=100, learning_rate=1e-2)
    args = GRPOConfig(output_dir=str(tmp_path), **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=96, max_steps=1, max_tool_calling_iterations=1, logging_steps=1, seed=0,
                      temperature=0.1)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=args, train_dataset=episode_dataset(2),
                          environment_factory=Wordle)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    assert logs and logs[-1]["tools/call_frequency"] > 0
    # each call TRL read was run by gymenvs' tool (a step of the env: the tiny model's word may still be garbled)
    assert any(environment.env.unwrapped.state()["step_count"] > 0 for environment in trainer.environments)
