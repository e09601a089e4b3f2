"""Constructor argument checking for envs, done by pydantic rather than by hand.

`@validate_config` on an env's `__init__` turns a bad or unknown argument into one
`gymenvs.core.errors.ConfigError` line (a `ValueError`) that names the argument, the value and what
is accepted, with the closest accepted name when there is one, raised at construction. Strict mode:
`True` is not an integer and `"3"` is not a number.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import pydantic

from gymenvs.core.errors import config_error

_validate_call = pydantic.validate_call(config=pydantic.ConfigDict(strict=True, arbitrary_types_allowed=True))

Init = TypeVar("Init", bound=Callable[..., Any])


def validate_config(init: Init) -> Init:
    """Check the arguments of `init` (an env's `__init__`) against its type hints when it is called."""
    validated = _validate_call(init)
    owner = init.__qualname__.rsplit(".", 1)[0]
    accepted = keyword_names(init)

    @functools.wraps(init)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return validated(*args, **kwargs)
        except pydantic.ValidationError as exc:
            if exc.title != init.__qualname__:  # raised inside the body: not about these arguments
                raise
            raise config_error(owner, exc, accepted) from None

    return checked  # type: ignore[return-value]


def keyword_names(function: Callable[..., Any]) -> list[str]:
    """The names `function` takes by keyword (not `self`, `*args` or `**kwargs`)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(function).parameters.values()
    return [param.name for param in parameters if param.kind in kinds and param.name != "self"]
