"""Validated options: one pydantic model per concept (`Sampling`, a rollout's options, a worker's).

`Options` models are strict (`True` is not an integer, `"3"` not a number), frozen, and forbid
unknown fields. A bad value is a `ValueError` at construction that names the option, the value and
what is allowed (the field's `description`); an unknown option is one that lists the known ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pydantic
from pydantic import AfterValidator, Field, StrictInt

PositiveInt = Annotated[StrictInt, Field(gt=0, description="a positive integer")]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, description="an integer >= 0")]
OptionalPositiveInt = Annotated[PositiveInt | None, Field(description="a positive integer or None")]
PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="a positive number of seconds")]


def _not_a_file(folder: str | Path | None) -> str | Path | None:
    if folder is not None and Path(folder).is_file():
        raise ValueError("it names a file")
    return folder


OptionalFolder = Annotated[Annotated[str, Field(min_length=1)] | Path | None, AfterValidator(_not_a_file),
                           Field(description="a folder (a non-empty str or a pathlib.Path) or None")]


class Options(pydantic.BaseModel):
    """A strict, frozen set of options whose errors read as plain `ValueError`s."""

    model_config = pydantic.ConfigDict(strict=True, frozen=True, extra="forbid")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except pydantic.ValidationError as exc:
            raise ValueError(describe(exc, type(self))) from None


def describe(exc: pydantic.ValidationError, model: type[pydantic.BaseModel]) -> str:
    """`name=value: expected <what is allowed>` for each error, in the words of the field's description."""
    problems = []
    seen = set()
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else "value"
        if name in seen:  # a union (`int | None`) reports one error per member: the first says enough
            continue
        seen.add(name)
        field = model.model_fields.get(name)
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown option {name!r} (allowed: {', '.join(model.model_fields)})")
        elif field is not None and field.description:
            problems.append(f"{name}={error['input']!r}: expected {field.description} ({error['msg']})")
        else:
            problems.append(f"{name}={error['input']!r}: {error['msg']}")
    return "; ".join(problems)
