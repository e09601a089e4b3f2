"""The one `<tool_call>` codec (gymenvs/core/actions.py): `render_tool_call` writes a call exactly as Qwen 2.5's
chat template does, and `split_tool_calls` / `parse_action` read back what it writes; the agent wire, the agent
env's observation and the TRL bridge all go through it."""

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gymenvs.container.agent.messages import render as render_messages
from gymenvs.container.agent.wire.common import reply_from_action
from gymenvs.core import ActionError, ToolCall, parse_action, render_tool_call, split_tool_calls
from gymenvs.core.actions import tool_call_from_mapping
from tests.action_support import any_text, json_values
from wrappers.trl.extras.tiny_model import tool_call_text
from wrappers.trl.rollout.transcript import called_tool

arguments_objects = st.dictionaries(any_text, json_values, max_size=4)
#: Tool names as tools have them (OpenAI allows `^[a-zA-Z0-9_-]{1,64}$`): the template writes them unescaped.
tool_names = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
#: Text around the blocks: anything without the tags.
plain_text = any_text.filter(lambda text: "tool_call>" not in text)


def no_free_text(text):
    raise ActionError("free text is not understood")


def readable(name, arguments):
    """A block ends at the first closing tag, as in Qwen's own parsers: a call whose JSON holds one cannot be read."""
    return "</tool_call>" not in json.dumps([name, arguments], ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(name=any_text.filter(bool), arguments=arguments_objects, before=plain_text, after=plain_text)
def test_a_rendered_call_reads_back_as_the_same_call(name, arguments, before, after):
    assume(readable(name, arguments))
    block = render_tool_call(name, arguments)
    assert block == render_tool_call(name, json.dumps(arguments))  # arguments as JSON text, as OpenAI messages hold them
    assert parse_action(block, no_free_text) == ToolCall(name, arguments)
    assert parse_action(f"{before}{block}{after}", no_free_text) == ToolCall(name, arguments)
    assert split_tool_calls(f"{before}\n{block}\n{after}") == (f"{before}\n\n{after}".strip(), [ToolCall(name, arguments)])


def _template_turn(tokenizer, content, calls):
    """The assistant turn the real Qwen 2.5 template writes, from its opening line to its end-of-turn token."""
    tool_calls = [{"type": "function", "function": {"name": name, "arguments": arguments}} for name, arguments in calls]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Go."}, message], tokenize=False)
    return text[text.rindex("<|im_start|>assistant") + len("<|im_start|>assistant") : text.rindex("<|im_end|>")]


@settings(max_examples=60, deadline=None)
@given(content=st.sampled_from(["", "I will look."]) | plain_text,
       calls=st.lists(st.tuples(tool_names, arguments_objects), min_size=1, max_size=3))
def test_calls_are_written_as_the_qwen_2_5_template_writes_them(_tiny, content, calls):
    assume(all(readable(name, arguments) for name, arguments in calls))
    tokenizer = _tiny[1]
    turn = _template_turn(tokenizer, content, calls)
    blocks = [render_tool_call(name, arguments) for name, arguments in calls]
    assert turn == (f"\n{content}" if content else "") + "".join(f"\n{block}" for block in blocks)
    assert [tool_call_text(name, arguments) for name, arguments in calls] == blocks
    # An agent env's observation: the OpenAI form (arguments as JSON text) shows the calls as the template does.
    history = {"role": "assistant", "content": content,
               "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
                              for i, (name, arguments) in enumerate(calls)]}
    assert render_messages([history]) == f"[assistant]\n{turn.strip()}"
    assert split_tool_calls(turn) == (content.strip(), [ToolCall(name, arguments) for name, arguments in calls])


def test_several_blocks_are_several_calls_to_a_reply_and_too_many_for_one_env_step():
    text = f"First ls, then pwd.\n{render_tool_call('bash', {'command': 'ls'})}\n{render_tool_call('bash', {'command': 'pwd'})}"
    calls = [ToolCall("bash", {"command": "ls"}), ToolCall("bash", {"command": "pwd"})]
    assert split_tool_calls(text) == ("First ls, then pwd.", calls)
    reply = reply_from_action(text)
    assert (reply.content, [(call.name, json.loads(call.arguments)) for call in reply.tool_calls]) == (
        "First ls, then pwd.", [("bash", {"command": "ls"}), ("bash", {"command": "pwd"})])
    with pytest.raises(ActionError, match="one tool call per turn, got 2 <tool_call> blocks"):
        parse_action(text, no_free_text)
    assert called_tool({"role": "assistant", "content": text}) is None


def test_a_think_prefix_is_text_to_the_codec_and_reasoning_to_the_wire():
    block = render_tool_call("guess", {"word": "crane"})
    text = f"<think>\nFive letters, common ones.\n</think>\n\n{block}"
    assert split_tool_calls(text) == ("<think>\nFive letters, common ones.\n</think>", [ToolCall("guess", {"word": "crane"})])
    assert parse_action(text, no_free_text) == ToolCall("guess", {"word": "crane"})
    assert called_tool({"role": "assistant", "content": text}) == "guess"
    reply = reply_from_action(text)
    assert (reply.reasoning, reply.content) == ("Five letters, common ones.", None)
    assert [(call.name, json.loads(call.arguments)) for call in reply.tool_calls] == [("guess", {"word": "crane"})]


@pytest.mark.parametrize("text", ['<tool_call>\n{"name": "guess", "arguments": {"word": }\n</tool_call>',
                                  '<tool_call>{"name": "guess"</tool_call>',
                                  '<tool_call>{"name": "guess", "arguments": {"note": "</tool_call>"}}</tool_call>'])
def test_malformed_json_in_a_block_is_an_action_error_naming_it(text):
    for read in (split_tool_calls, lambda t: parse_action(t, no_free_text), reply_from_action):
        with pytest.raises(ActionError, match="malformed JSON in tool call"):
            read(text)
    assert called_tool({"role": "assistant", "content": text}) is None


def test_arguments_text_that_is_no_json_object_is_refused_by_the_renderer_and_kept_by_the_observation():
    with pytest.raises(ActionError, match="malformed JSON in tool call"):
        render_tool_call("bash", '{"command": ')
    with pytest.raises(ActionError, match="must be an object, not list"):
        render_tool_call("bash", [1])
    empty = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>'
    assert render_tool_call("bash") == render_tool_call("bash", "") == render_tool_call("bash", {}) == empty
    history = [{"role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": '}}]}]
    assert render_messages(history) == "[assistant]\n" + render_tool_call("bash", {"input": '{"command": '})


@settings(max_examples=300, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 1]), cut=st.integers(0, 20), ensure_ascii=st.booleans())
def test_a_json_tool_call_reads_as_json_loads_reads_it(value, indent, cut, ensure_ascii):
    """The fast parser (pydantic's) gives what `json.loads` gives, and text it refuses gets json's own verdict."""
    text = json.dumps({"name": "t", "arguments": {"v": value}}, indent=indent, ensure_ascii=ensure_ascii)
    for candidate in (text, text[: len(text) - cut], f" {text}\n"):
        try:
            expected = json.loads(candidate)
        except ValueError:
            with pytest.raises(ActionError, match="malformed JSON in tool call"):
                parse_action(f"<tool_call>{candidate}</tool_call>", no_free_text)  # a block: read as JSON or refused
            continue
        assert parse_action(candidate, no_free_text) == ToolCall("t", expected["arguments"])


@pytest.mark.parametrize("text", ['{"name": "t", "arguments": {"v": "\\ud800"}}', '{"name": "t", "arguments": {"v": 1e400}}'])
def test_json_that_only_python_reads_is_read_as_python_reads_it(text):
    assert parse_action(text, no_free_text) == ToolCall("t", json.loads(text)["arguments"])


def test_an_integer_too_long_for_python_is_malformed_json_not_a_crash():
    with pytest.raises(ActionError, match="malformed JSON in tool call"):
        parse_action('{"name": "t", "arguments": {"v": ' + "9" * 5000 + "}}", no_free_text)


def test_a_mapping_actions_arguments_are_copied_and_json_texts_are_the_calls_own():
    """A caller's mapping is not the call's: a tool that changes its arguments must not change the caller's dict.
    Arguments decoded from JSON text are nobody else's, so the call keeps the decoded dict itself."""
    arguments = {"message": "hi"}
    call = parse_action({"name": "echo", "arguments": arguments}, None)
    assert call == ToolCall("echo", {"message": "hi"}) and call.arguments is not arguments
    call.arguments["message"] = "changed"
    assert arguments == {"message": "hi"}
    decoded = {"name": "echo", "arguments": {"message": "hi"}}
    assert tool_call_from_mapping(decoded, decoded=True).arguments is decoded["arguments"]
    assert parse_action(json.dumps(decoded), None) == ToolCall("echo", {"message": "hi"})
