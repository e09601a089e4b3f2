"""The public API for writing environments: `TextEnv`, `@tool`, `Outcome`, `ActionError`."""

from gymenvs.core.actions import ActionError, ToolCall, parse_action
from gymenvs.core.config import validate_config
from gymenvs.core.env import Outcome, TextEnv
from gymenvs.core.spaces import UnicodeText
from gymenvs.core.tools import ToolSpec, tool

__all__ = ["ActionError", "Outcome", "TextEnv", "ToolCall", "ToolSpec", "UnicodeText", "parse_action", "tool", "validate_config"]
