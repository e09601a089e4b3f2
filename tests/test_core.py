"""TextEnv, @tool and action parsing, on a small env defined here."""

import json
import subprocess
import sys
from typing import Literal

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded
from hypothesis import given, settings
from hypothesis import strategies as st

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, parse_action, tool
from gymenvs.core.spaces import UnicodeText, clip_text
from gymenvs.core.tools import describe_validation_error


class CounterEnv(TextEnv):
    default_max_turns = 3
    max_observation_length = 400

    def _start_episode(self, options):
        self.total = 0
        return "count"

    @tool
    def add(self, amount: int, note: str = "") -> Outcome:
        """Add to the counter.

        Args:
            amount: How much to add.
            note: A remark to echo back.
        """
        if amount < 0:
            raise ActionError("amount must be >= 0")
        self.total += amount
        return Outcome(f"total {self.total} {note}", reward=float(amount), terminated=self.total >= 10)

    @tool
    def shift(self, way: Literal["up", "down"]) -> str:
        """Shift the counter one step.

        Args:
            way: Which way to shift.
        """
        self.total += 1 if way == "up" else -1
        return f"total {self.total}"


@pytest.fixture
def env():
    env = CounterEnv()
    env.reset(seed=0)
    return env


def test_tool_schema_is_the_openai_function_format():
    add = CounterEnv.tools["add"].schema
    assert add == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add to the counter.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "integer", "description": "How much to add."},
                    "note": {"type": "string", "description": "A remark to echo back.", "default": ""},
                },
                "required": ["amount"],
            },
        },
    }
    assert CounterEnv.tools["shift"].schema["function"]["parameters"]["properties"]["way"]["enum"] == ["up", "down"]


def test_tool_schema_agrees_with_transformers_get_json_schema():
    from transformers import utils
    ours = CounterEnv.tools["shift"].schema["function"]
    theirs = utils.get_json_schema(CounterEnv.shift)["function"]
    assert ours["name"] == theirs["name"] and ours["description"] == theirs["description"]
    assert ours["parameters"]["properties"]["way"]["enum"] == theirs["parameters"]["properties"]["way"]["enum"]
    assert ours["parameters"]["required"] == theirs["parameters"]["required"]


def test_reset_info_lists_the_tools(env):
    _, info = env.reset()
    assert [schema["function"]["name"] for schema in info["tools"]] == ["add", "shift"]


@pytest.mark.parametrize(
    "source, message",
    [
        ("def t(self, x: int):\n    pass", "needs a docstring"),
        ('def t(self, x):\n    """Do.\n\n    Args:\n        x: A value.\n    """', "needs a type hint"),
        ('def t(self, x: int):\n    """Do."""', "needs a description"),
        ('def t(self, *xs: int):\n    """Do."""', "*args"),
    ],
)
def test_a_badly_declared_tool_fails_when_the_class_is_defined(source, message):
    namespace = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=message.replace("*", r"\*")):
        tool(namespace["t"])


@pytest.mark.parametrize(
    "action",
    [
        {"name": "add", "arguments": {"amount": 2}},
        {"type": "function", "function": {"name": "add", "arguments": '{"amount": 2}'}},
        '{"name": "add", "arguments": {"amount": 2}}',
        'Sure. <tool_call>\n{"name": "add", "arguments": {"amount": "2"}}\n</tool_call>',
    ],
)
def test_every_tool_call_form_runs_the_tool(env, action):
    observation, reward, terminated, truncated, info = env.step(action)
    assert observation.startswith("total 2")
    assert reward == 2.0 and "error" not in info


@pytest.mark.parametrize(
    "action, message",
    [
        ({"name": "nope", "arguments": {}}, "unknown tool 'nope'; available: add(amount: integer, note: string)"),
        ({"name": "add", "arguments": {}}, "missing argument 'amount'"),
        ({"name": "add", "arguments": {"amount": "x"}}, "argument 'amount' input should be a valid integer"),
        ({"name": "add", "arguments": {"amount": 1, "bogus": 2}}, "unexpected argument 'bogus'"),
        ({"name": "add", "arguments": {"amount": -1}}, "amount must be >= 0"),
        ({"name": "shift", "arguments": {"way": "sideways"}}, "'up' or 'down'"),
        ({"name": "add", "arguments": [1]}, "must be an object"),
        ({"arguments": {}}, 'needs a "name"'),
        ('{"name": "add", "arguments": {"amount": 1}', "malformed JSON"),
        ("<tool_call>{oops}</tool_call>", "malformed JSON"),
        ("<tool_call>{}</tool_call><tool_call>{}</tool_call>", "one tool call per turn"),
        ("free text", "free text is not understood"),
        (42, "not int"),
    ],
)
def test_a_bad_action_is_an_observation_saying_what_was_wrong(env, action, message):
    observation, reward, terminated, truncated, info = env.step(action)
    assert message in info["error"]
    assert observation == f"Invalid action: {info['error']}"
    assert (reward, terminated) == (0.0, False)
    assert env.total == 0  # nothing happened


def test_free_text_that_looks_like_json_falls_back_to_the_text_parser():
    class Answer(CounterEnv):
        def _parse_text(self, text):
            return ToolCall("add", {"amount": len(text)})

    env = Answer()
    env.reset()
    assert env.step("{1, 2}")[0].startswith("total 6")


def test_step_before_reset_and_after_the_end_raise():
    env = CounterEnv()
    with pytest.raises(ResetNeeded, match="reset"):
        env.step("x")
    env.reset()
    assert env.step({"name": "add", "arguments": {"amount": 10}})[2] is True
    with pytest.raises(ResetNeeded, match="episode has ended"):
        env.step("x")


def test_turn_limit_truncates_with_a_reason(env):
    for _ in range(2):
        assert env.step("x")[3] is False
    observation, _, terminated, truncated, info = env.step("x")
    assert (terminated, truncated) == (False, True)
    assert info["truncated_reason"] == "turn_limit" and "Turn limit reached (3 turns)" in observation


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_bad_max_turns_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="max_turns"):
        CounterEnv(max_turns=bad)


def test_bad_render_mode_and_unknown_reset_options_are_value_errors():
    with pytest.raises(ValueError, match="render_mode='human'"):
        CounterEnv(render_mode="human")
    with pytest.raises(ValueError, match=r"unknown reset option\(s\) \['level'\]"):
        CounterEnv().reset(options={"level": 3})


def test_state_is_json_serializable_and_counts_steps(env):
    env.step("x")
    state = json.loads(json.dumps(env.state()))
    assert state["step_count"] == 1 and len(state["episode_id"]) == 32
    first = state["episode_id"]
    env.reset()
    assert env.state()["episode_id"] != first and env.state()["step_count"] == 0


def test_observations_are_clipped_and_made_valid_unicode(env):
    observation = env.step({"name": "add", "arguments": {"amount": 1, "note": "\ud800" + "x" * 10_000}})[0]
    assert len(observation) <= 400 and "characters cut" in observation
    assert observation in env.observation_space
    observation.encode("utf-8")


def test_unicode_text_space():
    space = UnicodeText(5)
    assert "" in space and "héllo" in space and "日本" in space
    assert "toolong" not in space and "\ud800" not in space and 5 not in space
    assert all(space.sample() in space for _ in range(20))
    assert len(clip_text("a" * 1000, 100)) <= 100


def test_registered_envs_are_made_by_gymnasium():
    import gymenvs

    assert set(gymenvs.list_envs()) <= set(gym.registry)
    assert "gymenvs/Wordle-v0" in gymenvs.list_envs()


def test_import_gymenvs_stays_light():
    code = "import sys, gymenvs; print(sorted(m for m in ('torch', 'transformers', 'docker', 'datasets', 'reasoning_gym', 'wrappers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_parse_action_is_usable_on_its_own():
    assert parse_action('{"name": "a"}', None) == ToolCall("a", {})


def every_tool_spec():
    import gymenvs
    from gymenvs.core.tools import tool_spec

    specs = {}
    for env_id in gymenvs.list_envs():
        entry_point = gym.spec(env_id).entry_point
        module, _, name = entry_point.partition(":")
        try:
            env_class = getattr(__import__(module, fromlist=[name]), name)
        except ImportError:  # an optional dependency that is not installed
            continue
        for attribute in dir(env_class):
            spec = tool_spec(getattr(env_class, attribute, None))
            if spec is not None:
                specs[f"{env_id}:{spec.name}"] = spec
    specs["CounterEnv:add"] = tool_spec(CounterEnv.add)
    specs["CounterEnv:shift"] = tool_spec(CounterEnv.shift)
    return specs


TOOL_SPECS = every_tool_spec()
argument_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.lists(st.integers(), max_size=2))


@pytest.mark.parametrize("spec", TOOL_SPECS.values(), ids=TOOL_SPECS.keys())
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_tool_arguments_are_checked_as_the_schema_model_checks_them(spec, data):
    """`validate` uses a lighter validator than the schema's model; it must accept, convert and
    reject exactly as that model does (the method's own defaults fill what is left out)."""
    import pydantic

    names = st.sampled_from([*spec.arguments_model.model_fields, "bogus"])
    arguments = data.draw(st.dictionaries(names, argument_values, max_size=4))
    try:
        expected = spec.arguments_model.model_validate(arguments)
    except pydantic.ValidationError as exc:
        with pytest.raises(ActionError) as raised:
            spec.validate(arguments)
        assert describe_validation_error(exc) in str(raised.value)
        return
    checked = spec.validate(arguments)
    assert checked == {name: getattr(expected, name) for name in checked}
    assert set(checked) == set(arguments)
