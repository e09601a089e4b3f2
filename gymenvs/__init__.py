"""gymenvs: in-process, Gymnasium-compatible text environments for LLM agents.

`import gymenvs` registers every environment under the `gymenvs/` namespace:

    import gymnasium, gymenvs
    env = gymnasium.make("gymenvs/Wordle-v0")

Writing your own env (`TextEnv`, `@tool`, `validate_config`, `check_env`): docs/writing-envs.md.
"""

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, check_env, tool, validate_config
from gymenvs.core.errors import (
    ActionsError,
    ConfigError,
    EnvClosedError,
    GymenvsError,
    ReplayFileError,
    ResetOptionsError,
    ToolResultError,
)
from gymenvs.registry import describe_envs, list_envs, make_vec, register_envs, vector_entry_point
from gymenvs.signals import exit_on_sigterm

__version__ = "0.1.0"
__all__ = [
    "ActionError",
    "ActionsError",
    "ConfigError",
    "EnvClosedError",
    "GymenvsError",
    "ReplayFileError",
    "ResetOptionsError",
    "ToolResultError",
    "Outcome",
    "TextEnv",
    "ToolCall",
    "check_env",
    "describe_envs",
    "exit_on_sigterm",
    "list_envs",
    "make_vec",
    "tool",
    "validate_config",
    "vector_entry_point",
]

register_envs()
