"""Terminal tasks: every task in the Harbor format (Terminal-Bench 2 and its adapters) as a gymnasium env.

`task` reads one task folder, `tasks` a collection of them (a folder, an archive or a dataset),
`images` builds each task's image, `compose` starts a compose task's sidecars, `family` is the Harbor task family
of gymenvs/Terminal-v0 and TerminalAgent-v0, and `steps` runs a task of several steps. `grading` (with `toolguard`
and `services`) grades an episode where the agent cannot reach; `validate` checks tasks with their oracles;
`changes` keeps the files an agent changed, and `regrading` grades a stored episode again.
"""

from gymenvs.terminal.task import TaskConfig, TerminalTask

__all__ = ["TaskConfig", "TerminalTask"]
