"""The `@tool` decorator: an action an agent may take, with its JSON schema and argument checks.

A tool is an env method with type hints and a Google-style docstring. `function_schema` turns it
into the one JSON schema every path shows a model: `info["tools"]` on reset, `make_rollout_func`'s
prompt, and TRL's `environment_factory`, whose generated methods carry `tool_docstring(schema)` so
that transformers' `get_json_schema` derives exactly this dict from them. The schema and the argument
validator are built once, when the class is defined, so a tool without a docstring, a type hint, or
with a type no chat template can describe fails at import time, not at the first training step.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired

import docstring_parser
import pydantic
import pydantic_core
from typing_extensions import TypedDict

from gymenvs.core.actions import ActionError

TOOL_ATTRIBUTE = "__gymenvs_tool__"
#: The JSON types of the Python values a `Literal` or an `Enum` may list.
_SCALAR_TYPES: dict[type, str] = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}
_PLAIN_TYPES: dict[Any, dict[str, Any]] = {
    **{python: {"type": name} for python, name in _SCALAR_TYPES.items()},
    list: {"type": "array"},
    tuple: {"type": "array"},
    dict: {"type": "object"},
    Any: {},
}


@dataclass(frozen=True)
class ToolSpec:
    """What an agent is told about a tool, and how its arguments are checked."""

    name: str
    description: str
    schema: dict[str, Any]
    #: Checks the arguments and returns a plain dict, without the defaults of arguments left out
    #: (the method's own defaults apply). The core validator of a `TypeAdapter`: called directly, it spares
    #: each step the adapter's own Python layer.
    arguments_validator: pydantic_core.SchemaValidator

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments converted to the declared types; `ActionError` saying what is wrong."""
        try:
            return self.arguments_validator.validate_python(arguments)
        except pydantic.ValidationError as exc:
            raise self.invalid_arguments(exc) from None

    def invalid_arguments(self, exc: pydantic.ValidationError) -> ActionError:
        """The `ActionError` for arguments the validator refused: what is wrong, and the expected signature."""
        return ActionError(f"{self.name}: {describe_validation_error(exc)}. Expected {self.signature()}.")

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


def tool_schemas(tools: Mapping[str, ToolSpec]) -> list[dict[str, Any]]:
    """The tools' schemas in name order: the order TRL's `environment_factory` lists a class's methods
    in (`inspect.getmembers` sorts them), so every path renders the tools in the same order."""
    return [tools[name].schema for name in sorted(tools)]


def build_tool_spec(function: Callable) -> ToolSpec:
    schema = function_schema(function)
    hints = typing.get_type_hints(function)
    typed_fields = {
        param.name: hints[param.name] if param.default is param.empty else NotRequired[hints[param.name]]
        for param in _arguments(function)
    }
    name = function.__name__
    return ToolSpec(name, schema["function"]["description"], schema, _validator(name, typed_fields))


def function_schema(function: Callable) -> dict[str, Any]:
    """The tool in the OpenAI function-calling format that chat templates render.

    It is the dict transformers' `get_json_schema` derives from the same signature and docstring
    (`nullable` for `None`, no defaults, `required` only when some argument is), so TRL's
    `environment_factory` and the rollouts that render these dicts show a model the same prompt.
    `TypeError` names what cannot be described.
    """
    name = function.__name__
    doc = docstring_parser.parse(inspect.getdoc(function) or "", style=docstring_parser.DocstringStyle.GOOGLE)
    description = (doc.description or "").strip()
    if not description:
        raise TypeError(f"tool {name!r} needs a docstring: its first line tells the agent what the tool does")
    arg_docs = {param.arg_name: _one_line(param.description or "") for param in doc.params}
    hints = typing.get_type_hints(function)
    properties: dict[str, Any] = {}
    required = []
    for param in _arguments(function):
        if param.name not in hints:
            raise TypeError(f"tool {name!r}: argument {param.name!r} needs a type hint")
        if not arg_docs.get(param.name):
            raise TypeError(f"tool {name!r}: argument {param.name!r} needs a description in the docstring's Args section")
        try:
            properties[param.name] = {**type_schema(hints[param.name]), "description": arg_docs[param.name]}
        except TypeError as exc:
            raise TypeError(f"tool {name!r}: argument {param.name!r}: {exc}") from None
        if param.default is param.empty:
            required.append(param.name)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON schema of one argument's type hint: JSON scalars, `Literal`, `Enum`, `list`, `tuple`,
    `dict` and unions of them (`X | None` is `nullable`). Anything else is a `TypeError`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None and isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint], hint)
    if origin is None:
        if hint in _PLAIN_TYPES:
            return dict(_PLAIN_TYPES[hint])
        raise TypeError(f"{hint!r} cannot be described to a model (use JSON types, Literal, Enum, list, tuple or dict)")
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args)
    if origin is Literal:
        return _enum_schema(list(args), hint)
    if origin is list:
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 1 or ... in args:
            raise TypeError(f"{hint!r}: a tuple needs two or more fixed item types (use list[...] for any length)")
        return {"type": "array", "prefixItems": [type_schema(arg) for arg in args]} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])} if len(args) == 2 else {"type": "object"}
    raise TypeError(f"{hint!r} cannot be described to a model (use JSON types, Literal, Enum, list, tuple or dict)")


def tool_docstring(schema: Mapping[str, Any]) -> str:
    """A docstring from which transformers' `get_json_schema` reads the schema's descriptions back."""
    function = schema["function"]
    properties = function["parameters"]["properties"]
    if not properties:
        return function["description"]
    arguments = "\n".join(f"    {name}: {prop['description']}" for name, prop in properties.items())
    return f"{function['description']}\n\nArgs:\n{arguments}"


def _arguments(function: Callable) -> list[inspect.Parameter]:
    """The parameters an agent fills in: all but `self`."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    for param in parameters:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__!r}: *args and **kwargs cannot be described to an agent")
    return parameters


def _union_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    members = [type_schema(arg) for arg in args if arg is not type(None)]
    if len(members) == 1:
        schema = members[0]
    elif all(member.keys() == {"type"} and isinstance(member["type"], str) for member in members):
        names = sorted({member["type"] for member in members})
        schema = {"type": names[0] if len(names) == 1 else names}
    else:
        schema = {"anyOf": members}
    if type(None) in args:
        schema["nullable"] = True
    return schema


def _enum_schema(values: list[Any], hint: Any) -> dict[str, Any]:
    if not values or any(type(value) not in _SCALAR_TYPES for value in values):
        raise TypeError(f"{hint!r}: the choices must be JSON scalars (str, int, float, bool or None)")
    names = list(dict.fromkeys(_SCALAR_TYPES[type(value)] for value in values))
    return {"type": names[0] if len(names) == 1 else names, "enum": values}


def _one_line(text: str) -> str:
    """An argument's description with its line breaks folded, as chat templates show it."""
    return re.sub(r"\s*\n+\s*", " ", text.strip())


def _validator(name: str, fields: dict[str, Any]) -> pydantic_core.SchemaValidator:
    arguments = TypedDict(f"{name}_arguments", fields)  # type: ignore[misc]
    arguments.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return pydantic.TypeAdapter(arguments).validator  # type: ignore[return-value]  # built at once: no defer_build


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
        label = " | ".join(repr(v) for v in prop["enum"])
    elif "anyOf" in prop:
        label = " | ".join(_type_label(p) for p in prop["anyOf"])
    else:
        kind = prop.get("type", "any")
        label = " | ".join(kind) if isinstance(kind, list) else str(kind)
    return f"{label} | null" if prop.get("nullable") else label
