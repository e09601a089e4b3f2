"""TextEnv, @tool and action parsing, on a small env defined here."""

import datetime
import enum
import functools
import importlib
import json
import subprocess
import sys
from typing import Any, Literal

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded
from hypothesis import given, settings
from hypothesis import strategies as st

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, is_trainable, parse_action, tool
from gymenvs.core.spaces import UnicodeText, clip_text
from gymenvs.core.tools import describe_validation_error, function_schema, tool_docstring, tool_spec


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
                    "note": {"type": "string", "description": "A remark to echo back."},
                },
                "required": ["amount"],
            },
        },
    }
    assert CounterEnv.tools["shift"].schema["function"]["parameters"]["properties"]["way"]["enum"] == ["up", "down"]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def every_kind_of_argument(
    self,
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    way: Literal["up", "down"],
    mixed: Literal["a", 1],
    color: Color,
    words: list[str],
    table: dict[str, int],
    pair: tuple[int, str],
    maybe: int | None = None,
    either: str | int = 0,
    choices: Literal["x", "y"] | None = None,
    rows: list[list[int]] | None = None,
    anything: Any = None,
    bare: list = (),  # type: ignore[assignment]
):
    """Take every kind of argument a tool may declare.

    A second paragraph that
    spans two lines.

    Args:
        text: Some text.
        count: A count.
        ratio: A ratio.
        flag: A flag.
        way: Which way, with a description
            that continues on a second line.
        mixed: A string or a number.
        color: A color.
        words: Words.
        table: A table.
        pair: A pair.
        maybe: Perhaps a number.
        either: A string or an integer.
        choices: One of two, or none.
        rows: Rows of numbers.
        anything: Any value.
        bare: A list of anything.

    Returns:
        Nothing an agent reads.
    """


def no_arguments(self):
    """Do the one thing there is to do."""


@pytest.mark.parametrize("function", [every_kind_of_argument, no_arguments, CounterEnv.add, CounterEnv.shift])
def test_the_one_tool_schema_is_what_transformers_get_json_schema_derives(function):
    """TRL's environment_factory shows a model `get_json_schema` of each env method; the rollout path and
    `info["tools"]` show `function_schema`: the two must be the same dict, not merely agree on a few keys."""
    from transformers.utils import get_json_schema

    without_return = functools.wraps(function)(lambda *args, **kwargs: None)
    without_return.__annotations__ = {k: v for k, v in function.__annotations__.items() if k != "return"}
    assert function_schema(function) == get_json_schema(without_return)
    if function.__doc__ and "Returns:" not in function.__doc__:  # what environment_factory's methods carry
        rebuilt = functools.wraps(without_return)(lambda *args, **kwargs: None)
        rebuilt.__doc__ = tool_docstring(function_schema(function))
        assert get_json_schema(rebuilt) == function_schema(function)


def test_tool_docstring_gives_get_json_schema_the_schema_back():
    from transformers.utils import get_json_schema

    def method(self, way: Literal["up", "down"], maybe: int | None = None):
        pass

    method.__doc__ = tool_docstring(
        {"function": {"description": "Move.\n\nMore text.", "parameters": {"properties": {
            "way": {"description": "Which way."}, "maybe": {"description": "Perhaps."}}}}}
    )
    assert get_json_schema(method)["function"] == {
        "name": "method",
        "description": "Move.\n\nMore text.",
        "parameters": {
            "type": "object",
            "properties": {
                "way": {"type": "string", "enum": ["up", "down"], "description": "Which way."},
                "maybe": {"type": "integer", "nullable": True, "description": "Perhaps."},
            },
            "required": ["way"],
        },
    }


def test_a_type_no_chat_template_can_describe_fails_when_the_tool_is_defined():
    def pick(self, day: datetime.date):
        """Pick a day.

        Args:
            day: The day.
        """

    with pytest.raises(TypeError, match="tool 'pick': argument 'day': .*cannot be described to a model"):
        tool(pick)


def test_tools_are_listed_in_name_order_as_trl_lists_an_environment_factory_classs_methods():
    class Backwards(TextEnv):
        @tool
        def zebra(self) -> str:
            """Last by name, first by definition."""
            return ""

        @tool
        def apple(self) -> str:
            """First by name."""
            return ""

    assert [schema["function"]["name"] for schema in Backwards().tool_schemas()] == ["apple", "zebra"]
    assert list(Backwards.tools) == ["apple", "zebra"]


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


class EndingEnv(TextEnv):
    default_max_turns = 2

    def _start_episode(self, options):
        return "go"

    @tool
    def finish(self, score: float) -> Outcome:
        """End the episode with a score.

        Args:
            score: The reward.
        """
        return Outcome("done", reward=score, terminated=True)

    @tool
    def wait(self) -> str:
        """Do nothing."""
        return "waited"

    @tool
    def crash(self) -> Outcome:
        """Lose the sandbox."""
        return Outcome.infra("the sandbox died", "container_died", "exit code 137")

    @tool
    def cut(self) -> Outcome:
        """Stop the episode the way a tool did before outcomes existed."""
        return Outcome("cut short", truncated=True, info={"error": "the engine went away"})


WAIT = {"name": "wait", "arguments": {}}


@pytest.mark.parametrize(("actions", "expected"), [
    ([{"name": "finish", "arguments": {"score": 1.0}}], ("model", "solved", "")),
    ([{"name": "finish", "arguments": {"score": 0.0}}], ("model", "failed", "")),
    ([WAIT, WAIT], ("model", "turn_limit", "2 turns")),
    ([WAIT, {"name": "crash", "arguments": {}}], ("infra", "container_died", "exit code 137")),
    ([{"name": "cut", "arguments": {}}], ("infra", "truncated", "the engine went away")),
])
def test_the_last_step_says_who_ended_the_episode(actions, expected):
    env = EndingEnv()
    env.reset(seed=0)
    for action in actions[:-1]:
        info = env.step(action)[4]
        assert "outcome" not in info  # only the last step says
    *_, terminated, truncated, info = env.step(actions[-1])
    assert terminated or truncated
    assert (info["outcome"], info["outcome_reason"], info["outcome_detail"]) == expected
    assert is_trainable(info) is (expected[0] == "model")


def test_an_infra_outcome_truncates_and_keeps_its_error():
    env = EndingEnv()
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step({"name": "crash", "arguments": {}})
    assert (reward, terminated, truncated) == (0.0, False, True) and info["error"] == "exit code 137"


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_bad_max_turns_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="max_turns"):
        CounterEnv(max_turns=bad)


def test_bad_render_mode_and_unknown_reset_options_are_value_errors():
    with pytest.raises(ValueError, match="render_mode='human'"):
        CounterEnv(render_mode="human")
    with pytest.raises(ValueError, match=r"unknown reset option 'level'=3; accepted: none"):
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
    heavy = ("torch", "transformers", "docker", "datasets", "reasoning_gym", "wrappers", "openai", "gymenvs.eval")
    code = f"import sys, gymenvs; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_parse_action_is_usable_on_its_own():
    assert parse_action('{"name": "a"}', None) == ToolCall("a", {})


def every_tool():
    """Every built-in env's tool functions (and the ones above), by `env id:tool name`."""
    import gymenvs

    functions = {}
    for env_id in gymenvs.list_envs():
        entry_point = gym.spec(env_id).entry_point
        module = importlib.import_module(entry_point.partition(":")[0])
        env_classes = [value for value in vars(module).values() if isinstance(value, type) and issubclass(value, TextEnv)]
        for env_class in env_classes:  # TextArena-v0 builds one of several classes
            for spec in env_class.tools.values():
                functions[f"{env_id}:{env_class.__name__}.{spec.name}"] = getattr(env_class, spec.name)
    functions["CounterEnv:add"] = CounterEnv.add
    functions["CounterEnv:shift"] = CounterEnv.shift
    return functions


TOOLS = every_tool()
argument_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.lists(st.integers(), max_size=2)
)


@functools.cache
def arguments_model(function):
    """The reference: a pydantic model of the tool's arguments, with the method's defaults (built once per tool:
    building a model costs milliseconds, and each tool is drawn 60 examples)."""
    import inspect
    import typing

    import pydantic

    hints = typing.get_type_hints(function)
    fields = {
        param.name: (hints[param.name], ... if param.default is param.empty else param.default)
        for param in list(inspect.signature(function).parameters.values())[1:]
    }
    return pydantic.create_model("arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)


@pytest.mark.parametrize("function", TOOLS.values(), ids=TOOLS.keys())
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_tool_arguments_are_checked_as_a_pydantic_model_of_the_signature_checks_them(function, data):
    """`validate` uses a light validator (a TypedDict); it must accept, convert and reject exactly as a
    model of the signature does (the method's own defaults fill what is left out)."""
    import pydantic

    spec, model = tool_spec(function), arguments_model(function)
    names = st.sampled_from([*model.model_fields, "bogus"])
    arguments = data.draw(st.dictionaries(names, argument_values, max_size=4))
    try:
        expected = model.model_validate(arguments)
    except pydantic.ValidationError as exc:
        with pytest.raises(ActionError) as raised:
            spec.validate(arguments)
        assert describe_validation_error(exc) in str(raised.value)
        return
    checked = spec.validate(arguments)
    assert checked == {name: getattr(expected, name) for name in checked}
    assert set(checked) == set(arguments)


@pytest.mark.parametrize("function", TOOLS.values(), ids=TOOLS.keys())
def test_every_built_in_tool_schema_is_what_get_json_schema_derives(function):
    from transformers.utils import get_json_schema

    without_return = functools.wraps(function)(lambda *args, **kwargs: None)
    without_return.__annotations__ = {k: v for k, v in function.__annotations__.items() if k != "return"}
    without_return.__doc__ = tool_docstring(tool_spec(function).schema)
    assert get_json_schema(without_return) == tool_spec(function).schema


def test_check_env_catches_an_env_that_shows_other_tools_than_its_schemas():
    from gymenvs.core import check_env

    class Drifted(CounterEnv):
        def tool_schemas(self):
            return [{**schema, "function": {**schema["function"], "description": "Other."}} for schema in super().tool_schemas()]

    check_env(CounterEnv(), skip_render_check=True)
    with pytest.raises(AssertionError, match=r"tool_schemas\(\) shows a model"):
        check_env(Drifted(), skip_render_check=True)


def test_check_env_fails_an_env_without_any_action():
    from gymenvs.core import check_env

    class Mute(TextEnv):
        def _start_episode(self, options):
            return "nothing to do"

    class Talks(Mute):
        def _parse_text(self, text):
            raise ActionError("say something else")

    check_env(Talks(), skip_render_check=True)  # free text it understands is an action
    with pytest.raises(AssertionError, match="Mute has no @tool methods and overrides neither _parse_text nor _act"):
        check_env(Mute(), skip_render_check=True)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_observation_length": 20}, "too small to hold a clipped observation"),
        ({"observation_space": UnicodeText(100)}, "holds fewer characters than max_observation_length=400"),
        ({"observation_space": UnicodeText(400, min_length=1)}, "expected min_length 0"),
        ({"action_space": UnicodeText(3, min_length=2)}, r"action_space=UnicodeText\(2, 3\): expected min_length 0"),
        ({"action_space": UnicodeText(20)}, r"action_space=UnicodeText\(0, 20\) holds fewer characters than a call of a tool"),
    ],
    ids=["limit-below-cut-marker", "space-shorter-than-limit", "space-needs-text", "action-needs-text",
         "action-shorter-than-a-tool-call"],
)
def test_check_env_fails_inconsistent_length_limits(change, message):
    from gymenvs.core import check_env

    class Limited(CounterEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = change.get("observation_space", self.observation_space)
            self.action_space = change.get("action_space", self.action_space)

    if "max_observation_length" in change:
        Limited.max_observation_length = change["max_observation_length"]
    with pytest.raises(AssertionError, match=message):
        check_env(Limited(), skip_render_check=True)
