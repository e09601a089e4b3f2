"""Constructor argument checking for envs, done by pydantic rather than by hand.

`@validate_config` on an env's `__init__` turns a bad or unknown argument into one
`gymenvs.core.errors.ConfigError` line (a `ValueError`) that names the argument, the value and what
is accepted, with the closest accepted name when there is one, raised at construction. Strict mode:
`True` is not an integer and `"3"` is not a number.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pydantic

from gymenvs.core.errors import config_error

_validate_call = pydantic.validate_call(config=pydantic.ConfigDict(strict=True, arbitrary_types_allowed=True))

Init = TypeVar("Init", bound=Callable[..., Any])


def validate_config(init: Init) -> Init:
    """Check the arguments of `init` (an env's `__init__`) against its type hints when it is called."""
    validated = _validate_call(init)
    accepted = keyword_names(init) or []

    @functools.wraps(init)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return validated(*args, **kwargs)
        except pydantic.ValidationError as exc:
            if exc.title != init.__qualname__:  # raised inside the body: not about these arguments
                raise
            owner = type(args[0]) if args else None  # the class being built: a subclass calling super().__init__ too
            raise config_error(owner.__name__ if owner else init.__qualname__, exc, accepted) from None

    return checked  # type: ignore[return-value]


def keyword_names(creator: Callable[..., Any], kwargs: Mapping[str, Any] | None = None) -> list[str] | None:
    """The keyword arguments `creator` (an env class or a function that builds an env) accepts: its
    signature's names (not `self` or `*args`), and with `**kwargs` the fields of its `config_class`
    (a pydantic model, as the container envs have) and the names its `option_names_for(kwargs)` adds for
    the keyword arguments it is given (a container env: the options of the family they name). None when
    `**kwargs` leaves them unknown."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(creator).parameters.values()
    names = [param.name for param in parameters if param.kind in kinds and param.name != "self"]
    if any(param.kind is inspect.Parameter.VAR_KEYWORD for param in parameters):
        config_class = getattr(creator, "config_class", None)
        if config_class is None:
            return None
        names += [name for name in config_class.model_fields if name not in names]
        option_names_for = getattr(creator, "option_names_for", None)
        if option_names_for is not None:
            names += [name for name in sorted(option_names_for(kwargs or {})) if name not in names]
    return names
