"""The offline tiny model: a tokenizer trained in-process, TRL's Qwen2.5 chat template, a seeded Qwen2."""

import pytest
import torch
from bridge_support import tool_call
from hypothesis import given, settings
from hypothesis import strategies as st
from trl.chat_template_utils import (
    add_response_schema,
    is_chat_template_prefix_preserving,
    parse_response,
    supports_tool_calling,
)

from wrappers.trl import tiny_model, tiny_tokenizer


@settings(max_examples=50, deadline=None)
@given(text=st.text())
def test_the_tokenizer_round_trips_any_text(text):
    tokenizer = _TOKENIZER
    assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text


_TOKENIZER = tiny_tokenizer()


def test_trl_recognises_the_chat_template_and_parses_tool_calls(model_and_tokenizer):
    _, tokenizer = model_and_tokenizer
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    add_response_schema(tokenizer)  # raises "Unrecognized chat template" for any template trl does not ship
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Guess."}], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    answer = tokenizer(tool_call("guess", word="crane") + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, answer, prefix=prompt)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "guess", "arguments": {"word": "crane"}}}]


def test_the_model_is_a_seeded_fp32_qwen2_sized_to_its_tokenizer():
    (first, tokenizer), (again, _), (other, _) = tiny_model(seed=3), tiny_model(seed=3), tiny_model(seed=4)
    assert type(first).__name__ == "Qwen2ForCausalLM" and first.dtype == torch.float32
    assert first.config.vocab_size == len(tokenizer) and first.generation_config.eos_token_id == tokenizer.eos_token_id
    weights = [dict(m.named_parameters())["model.embed_tokens.weight"] for m in (first, again, other)]
    assert torch.equal(weights[0], weights[1]) and not torch.equal(weights[0], weights[2])


def test_paired_rows_hold_each_prompt_with_its_own_completion_only():
    """`imitate(..., paired=True)` teaches a choice that depends on the prompt; crossing every prompt with every
    completion teaches that it does not."""
    from wrappers.trl.extras.tiny_model import _imitation_batch

    tokenizer = tiny_tokenizer()
    prompts = [tokenizer.encode("ball a", add_special_tokens=False), tokenizer.encode("ball b", add_special_tokens=False)]
    crossed = _imitation_batch(tokenizer, prompts, ["a", "b"])
    paired = _imitation_batch(tokenizer, prompts, ["a", "b"], paired=True)
    assert len(crossed["input_ids"]) == 4 and len(paired["input_ids"]) == 2
    answers = [tokenizer.decode([t for t in row if t != -100][:-1]) for row in paired["labels"].tolist()]
    assert answers == ["a", "b"]  # the eos token ends each answer


def test_paired_needs_one_completion_per_prompt():
    from wrappers.trl.extras.tiny_model import _imitation_batch

    tokenizer = tiny_tokenizer()
    with pytest.raises(ValueError, match="paired=True needs one completion per prompt, got 1 for 2 prompts"):
        _imitation_batch(tokenizer, [[1], [2]], ["a"], paired=True)
