"""The public API for writing environments: `TextEnv`, `@tool`, `Outcome`, `ActionError`,
`ResetOptionsError`, image observations, and `check_env`."""

from gymenvs.core.actions import ActionError, ToolCall, parse_action, render_tool_call, split_tool_calls
from gymenvs.core.checks import check_env
from gymenvs.core.config import validate_config
from gymenvs.core.env import Outcome, TextEnv
from gymenvs.core.errors import ResetOptionsError
from gymenvs.core.images import content_blocks, text_image_space, text_view
from gymenvs.core.outcomes import EndedBy, InfraError, ended_by, ending, is_trainable
from gymenvs.core.spaces import UnicodeText
from gymenvs.core.tools import ToolSpec, function_schema, tool

__all__ = [
    "ActionError",
    "EndedBy",
    "InfraError",
    "Outcome",
    "ResetOptionsError",
    "TextEnv",
    "ToolCall",
    "ToolSpec",
    "check_env",
    "UnicodeText",
    "content_blocks",
    "ended_by",
    "ending",
    "function_schema",
    "is_trainable",
    "parse_action",
    "render_tool_call",
    "split_tool_calls",
    "text_image_space",
    "text_view",
    "tool",
    "validate_config",
]
