"""Terminal tasks: every task in the Harbor format (Terminal-Bench 2 and its adapters) as a gymnasium env.

`task` reads one task folder, `tasks` a collection of them (a folder, an archive or a dataset),
`images` builds each task's image, `base` is what Harbor tasks change in the SWE envs, `env` holds
gymenvs/Terminal-v0 and TerminalAgent-v0. `grading` (with `engine` and `toolguard`) grades an episode
where the agent cannot reach; `validate` and `validate_cli` check tasks with their oracles.
"""

from gymenvs.terminal.task import TaskConfig, TerminalTask

__all__ = ["TaskConfig", "TerminalTask"]
