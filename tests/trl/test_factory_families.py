"""`environment_factory` through every model family's template: TRL's own tool loop, with a family's real template
(tiny tokenizers built offline, wrappers/trl/extras/tiny_families.py), calls gymenvs' tools.

TRL parses a family's calls with its response parser (`add_response_schema`); for a family TRL does not know
(DeepSeek V3), the tokenizer gymenvs' `response_parser` returns carries gymenvs' own. In the matrix the model's
turns are scripted (three calls written as the family's template writes them, then a reply), so every family runs
in a fraction of a second; two families also run with turns the model samples, once taught the call.
"""

from __future__ import annotations

import datetime
import functools

import pytest
from trl import GRPOConfig, GRPOTrainer

from gymenvs.dialects import response_parser
from tests.trl.families_support import GUESSES, PARSED_FAMILIES
from wrappers.trl import CPU_TRAINING_ARGS, environment_factory, episode_dataset
from wrappers.trl.rollout.transcript import training_template

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")


@functools.cache
def trained(family: str, output_dir: str):
    from wrappers.trl.extras.tiny_families import (
        family_model,
        family_tokenizer,
        model_turn_text,
        script_generation,
        tool_call_turns,
    )

    tokenizer = family_tokenizer(family)
    model = family_model(tokenizer)
    template = training_template(tokenizer)
    turns = tool_call_turns(tokenizer, "guess", "word", list(GUESSES), template)
    reply = {"role": "assistant", "content": "Done."}
    turns.append(tokenizer.encode(model_turn_text(tokenizer, reply, "Done.", [{"role": "user", "content": "Next."}], template),
                                  add_special_tokens=False))
    generated = script_generation(model, turns)
    args = GRPOConfig(output_dir=output_dir, **CPU_TRAINING_ARGS, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=2000, max_steps=1, max_tool_calling_iterations=len(GUESSES), logging_steps=1,
                      seed=0)
    Wordle = environment_factory("gymenvs/Wordle-v0", env_kwargs={"max_turns": len(GUESSES)})
    trainer = GRPOTrainer(model=model, processing_class=response_parser(tokenizer), args=args,
                          train_dataset=episode_dataset(2), environment_factory=Wordle)
    trainer.train()
    return trainer, generated


@pytest.mark.parametrize("family", PARSED_FAMILIES)
def test_trls_tool_loop_reads_each_familys_calls_and_gymenvs_plays_them(family, tmp_path_factory):
    trainer, generated = trained(family, str(tmp_path_factory.mktemp(family)))
    assert len(generated) == len(GUESSES) + 1  # a turn after each tool result: TRL read every call
    (logs,) = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    assert logs["tools/call_frequency"] == len(GUESSES) and logs["tools/failure_frequency"] == 0
    for environment in trainer.environments:
        state = environment.env.unwrapped.state()
        assert state["guesses"] == list(GUESSES) and state["done"]  # each call was a scored guess, in order


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama3_1", "gptoss"])
def test_trls_tool_loop_runs_the_calls_a_taught_model_samples(tmp_path, family, monkeypatch):
    import transformers.utils.chat_template_utils as chat_templates

    from wrappers.trl.extras.tiny_families import family_model, family_tokenizer, tool_call_turns
    from wrappers.trl.extras.tiny_model import imitate

    # gpt-oss's template writes today's date into every prompt (TRL's training template too): one day for this test,
    # so that what the model taught in 100 steps samples does not change with the day (on 2026-11-29 it sampled no call)
    monkeypatch.setattr(chat_templates, "datetime", _OneDay)
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


class _OneDay(datetime.datetime):
    """`datetime` whose `now()` is always 2026-11-28, noon."""

    @classmethod
    def now(cls, tz=None):
        return cls(2026, 11, 28, 12, tzinfo=tz)
