"""The `@tool` decorator: an action an agent may take, with its JSON schema and argument checks.

A tool is an env method with type hints and a Google-style docstring (the format that
transformers' `get_json_schema` and TRL read). Its schema and argument validator are built
once, when the class is defined, so a tool without a docstring or a type hint fails at
import time, not at the first training step.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable

import docstring_parser
import pydantic
from typing_extensions import NotRequired, TypedDict

from gymenvs.core.actions import ActionError

TOOL_ATTRIBUTE = "__gymenvs_tool__"


@dataclass(frozen=True)
class ToolSpec:
    """What an agent is told about a tool, and how its arguments are checked."""

    name: str
    description: str
    schema: dict[str, Any]
    arguments_model: type[pydantic.BaseModel]
    #: Checks the same fields as `arguments_model` but returns a plain dict, without the defaults of
    #: arguments left out (the method's own defaults apply): a few times cheaper than building a
    #: model instance on every step.
    arguments_validator: pydantic.TypeAdapter

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments converted to the declared types; `ActionError` saying what is wrong."""
        try:
            return self.arguments_validator.validate_python(arguments)
        except pydantic.ValidationError as exc:
            raise ActionError(f"{self.name}: {describe_validation_error(exc)}. Expected {self.signature()}.") from None

    def signature(self) -> str:
        """A one-line signature such as `guess(word: string)` for error messages and help."""
        properties = self.schema["function"]["parameters"]["properties"]
        params = ", ".join(f"{name}: {_type_label(prop)}" for name, prop in properties.items())
        return f"{self.name}({params})"


def tool(method: Callable) -> Callable:
    """Mark an env method as a tool an agent may call."""
    setattr(method, TOOL_ATTRIBUTE, build_tool_spec(method))
    return method


def tool_spec(member: Any) -> ToolSpec | None:
    return getattr(member, TOOL_ATTRIBUTE, None)


def build_tool_spec(function: Callable) -> ToolSpec:
    name = function.__name__
    doc = docstring_parser.parse(inspect.getdoc(function) or "", style=docstring_parser.DocstringStyle.GOOGLE)
    description = " ".join(part for part in (doc.short_description, doc.long_description) if part)
    if not description:
        raise TypeError(f"tool {name!r} needs a docstring: its first line tells the agent what the tool does")
    arg_docs = {param.arg_name: param.description for param in doc.params}
    hints = typing.get_type_hints(function)
    fields: dict[str, Any] = {}
    typed_fields: dict[str, Any] = {}
    for param in list(inspect.signature(function).parameters.values())[1:]:  # skip self
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args and **kwargs cannot be described to an agent")
        if param.name not in hints:
            raise TypeError(f"tool {name!r}: argument {param.name!r} needs a type hint")
        if not arg_docs.get(param.name):
            raise TypeError(f"tool {name!r}: argument {param.name!r} needs a description in the docstring's Args section")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], pydantic.Field(default, description=arg_docs[param.name]))
        typed_fields[param.name] = hints[param.name] if default is ... else NotRequired[hints[param.name]]
    model = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    return ToolSpec(name, description, _function_schema(name, description, model), model, _validator(name, typed_fields))


def _validator(name: str, fields: dict[str, Any]) -> pydantic.TypeAdapter:
    arguments = TypedDict(f"{name}_arguments", fields)  # type: ignore[misc]
    arguments.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return pydantic.TypeAdapter(arguments)


def _function_schema(name: str, description: str, model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The tool in the OpenAI function-calling format that chat templates render."""
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    parameters.pop("additionalProperties", None)
    for prop in parameters.get("properties", {}).values():
        prop.pop("title", None)
    parameters.setdefault("required", [])
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def describe_validation_error(exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"missing argument {where!r}")
        elif error["type"] == "extra_forbidden":
            problems.append(f"unexpected argument {where!r}")
        else:
            problems.append(f"argument {where!r} {error['msg'][0].lower()}{error['msg'][1:]} (got {_short_repr(error['input'])})")
    return "; ".join(problems)


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_label(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(_type_label(p) for p in prop["anyOf"])
    return str(prop.get("type", "any"))
