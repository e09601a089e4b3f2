"""What stricter chat templates refuse, and the messages they get instead; reasoning under every parser's key."""

from __future__ import annotations

import pytest

from gymenvs.dialects import apply_chat_template, with_one_system_message
from wrappers.trl.extras.tiny_families import family_tokenizer

#: A Codex-like start (its instructions and its developer notes, two system messages) and a Claude Code-like note
#: (a system message after the user's).
CLI_MESSAGES = [{"role": "system", "content": "You are a coding agent."}, {"role": "system", "content": "Skills: none."},
                {"role": "user", "content": "Fix the bug."}, {"role": "system", "content": "Working directory: /testbed"}]


def test_a_template_that_takes_one_system_message_first_gets_the_clis_as_one():
    tokenizer = family_tokenizer("qwen3_5_think")
    with pytest.raises(Exception, match="System message must be at the beginning"):
        tokenizer.apply_chat_template(CLI_MESSAGES, tokenize=False)
    rendered = apply_chat_template(tokenizer, CLI_MESSAGES, tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<|im_start|>system\nYou are a coding agent.\n\nSkills: none.<|im_end|>")
    assert "<|im_start|>user\nWorking directory: /testbed<|im_end|>" in rendered  # in its place, as the user's
    assert with_one_system_message(CLI_MESSAGES)[1:] == [CLI_MESSAGES[2], {"role": "user", "content": CLI_MESSAGES[3]["content"]}]


def test_a_template_that_takes_them_renders_the_messages_as_they_are():
    tokenizer = family_tokenizer("qwen2_5")
    as_they_are = tokenizer.apply_chat_template(CLI_MESSAGES, tokenize=False)
    assert apply_chat_template(tokenizer, CLI_MESSAGES, tokenize=False) == as_they_are


def test_a_refusal_no_adaptation_answers_is_raised_as_the_template_said():
    tokenizer = family_tokenizer("llama3_1")
    calls = [{"type": "function", "function": {"name": "guess", "arguments": {"word": word}}} for word in ("crane", "slate")]
    with pytest.raises(Exception, match="only supports single tool-calls"):
        apply_chat_template(tokenizer, [{"role": "user", "content": "Play."},
                                        {"role": "assistant", "content": "", "tool_calls": calls}], tokenize=False)


@pytest.mark.parametrize("key", ["reasoning_content", "thinking", "reasoning"])
def test_reasoning_is_read_under_each_parsers_key(key):
    """gpt-oss's and LFM2.5's parsers write `thinking`, Qwen's and GLM's `reasoning_content`: an agent gets the
    reasoning either way, and a turn of reasoning and text is still an assistant message to the env."""
    from gymenvs.container.agent.wire.common import reply_from_message
    from gymenvs.dialects import action_of

    message = {"role": "assistant", "content": "Done.", key: "Checked twice."}
    assert reply_from_message(message).reasoning == "Checked twice."
    assert action_of(message) is message


def test_trls_lfm2_parser_ends_a_call_at_its_first_parenthesis():
    """A known gap of TRL's parser (docs/model-families.md), kept in view: when TRL reads the whole call, this fails
    and the docs' gap goes."""
    from gymenvs.dialects import TurnReader

    tokenizer = family_tokenizer("lfm2_v2")
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Go."}], add_generation_prompt=True,
                                           return_dict=True)["input_ids"]
    turn = tokenizer.encode("<|tool_call_start|>[bash(command='echo $((6 * 2))')]<|tool_call_end|><|im_end|>",
                            add_special_tokens=False)
    (call,) = TurnReader(tokenizer).read(turn, prompt)["tool_calls"]
    assert call["function"]["arguments"] == {"command": "'echo $((6 * 2"}


@pytest.mark.parametrize(("family", "with_parts"), [
    ("qwen2_5", TypeError), ("gptoss", TypeError), ("deepseekv3", TypeError),
    ("llama3_1", "[{'type': 'text', 'text': 'Fix it.'}]"), ("gemma4", "Fix it."), ("glm4moe", "Fix it."),
])
def test_a_content_of_text_parts_renders_once_joined(family, with_parts):
    """What a template makes of a content of text parts (docs/model-families.md), and of the one string the agent
    env gives the policy instead (`as_text_content`)."""
    from gymenvs.container.agent.request import as_text_content

    tokenizer = family_tokenizer(family)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Fix it."}]}]
    if with_parts is TypeError:
        with pytest.raises(TypeError):
            tokenizer.apply_chat_template(messages, tokenize=False)
    else:
        assert with_parts in tokenizer.apply_chat_template(messages, tokenize=False)
    joined = [as_text_content(message) for message in messages]
    assert "Fix it." in tokenizer.apply_chat_template(joined, tokenize=False) and "'type'" not in str(joined)
