"""Hypothesis strategies for env actions: anything an LLM (or a fuzzer) might send to `step`."""

import json

from hypothesis import strategies as st

any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)


#: Argument names of the gymenvs tools, so that fuzzed calls often reach argument validation.
ARGUMENT_NAMES = ["word", "row", "col", "digit", "direction", "message", "answer", "command", "path", "old_text", "new_text", "content", "start_line"]


@st.composite
def actions(draw, tool_names):
    """An action: free text (any Unicode, empty, huge, half-JSON) or a tool call (as a mapping, JSON or a
    <tool_call> block) to a known or unknown tool with arbitrary arguments."""
    name = draw(st.sampled_from(tool_names) | any_text)
    known_names = st.sampled_from(ARGUMENT_NAMES)
    arguments = draw(st.dictionaries(known_names | any_text, json_values, max_size=3))
    call = {"name": name, "arguments": arguments}
    return draw(
        st.sampled_from(["left", "stay", "right", "[crane]", "1 2 3", "4", "", " " * 3])
        | any_text
        | st.just(call)
        | st.just(json.dumps(call))
        | st.just(f"<tool_call>{json.dumps(call)}</tool_call>")
        | st.builds(lambda text: text * 5_000, any_text)
        | st.just("{" * 100_000)
    )
