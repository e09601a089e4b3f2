"""`gymnasium.make_vec` creators for registered env ids, reached by a string entry point.

gymenvs registers each env with `vector_entry_point="wrappers.vector.registered:<env id>"`, for
example `"wrappers.vector.registered:gymenvs/Wordle-v0"`. Gymnasium imports this module only when
`make_vec` is called (so `import gymenvs` never imports `wrappers`) and looks the id up as an
attribute, which gives `make_vector_env` with the id filled in: gymnasium's creator protocol
(`creator(num_envs=N, **kwargs)`) does not pass the id itself.
"""

from __future__ import annotations

import functools

from wrappers.vector.make import make_vector_env


def __getattr__(env_id: str) -> functools.partial:
    if env_id.startswith("__"):  # not an env id: a dunder lookup (copy, pickle, introspection)
        raise AttributeError(env_id)
    return functools.partial(make_vector_env, env_id)
