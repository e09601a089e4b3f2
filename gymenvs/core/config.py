"""Constructor argument checking for envs, done by pydantic rather than by hand.

`@validate_config` on an env's `__init__` turns a bad value into a `ValueError`
(pydantic's `ValidationError`) that names the argument, the value and what is allowed,
raised at construction. Strict mode: `True` is not an integer and `"3"` is not a number.
"""

import pydantic

validate_config = pydantic.validate_call(config=pydantic.ConfigDict(strict=True, arbitrary_types_allowed=True))
