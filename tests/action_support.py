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
ARGUMENT_NAMES = ["word", "row", "col", "digit", "direction", "message", "answer", "command", "path", "old_text", "new_text",
                  "content", "start_line"]


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


def play_arbitrary_actions(env, seed, data, max_steps):
    """Reset with `seed`, then step with up to `max_steps` drawn actions, checking after each step that
    nothing crashed: the observation is in the space, the flags are Python bools, the state is JSON.
    Yields each step's result for test-specific checks."""
    observation, info = env.reset(seed=seed)
    assert observation in env.observation_space
    tool_names = [schema["function"]["name"] for schema in info["tools"]]
    for _ in range(data.draw(st.integers(1, max_steps))):
        result = env.step(data.draw(actions(tool_names)))
        observation, reward, terminated, truncated, info = result
        assert observation in env.observation_space
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        assert isinstance(info, dict)
        json.dumps(env.unwrapped.state())
        yield result
        if terminated or truncated:
            return
