"""Terminal tasks: every task in the Harbor format (Terminal-Bench 2 and its adapters) as a gymnasium env.

`task` reads one task folder, `tasks` a collection of them (a folder, an archive or a dataset),
`images` builds each task's image, `env` is gymenvs/Terminal-v0 and `agent_env` its agent variant.
"""

from gymenvs.terminal.task import TaskConfig, TerminalTask

__all__ = ["TaskConfig", "TerminalTask"]
