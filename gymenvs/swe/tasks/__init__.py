"""SWE tasks: dataset rows as `Task`s (`tasks`), fixture tasks built from real releases (`upstream`),
and the shipped fixtures (`fixtures/`)."""

from gymenvs.swe.tasks.tasks import (
    FIXTURES,
    REQUIRED_FIELDS,
    Task,
    fixtures_path,
    load_tasks,
    parse_test_list,
    task_from_row,
    task_to_row,
)

__all__ = [
    "FIXTURES", "REQUIRED_FIELDS", "Task", "fixtures_path", "load_tasks", "parse_test_list", "task_from_row", "task_to_row",
]
