"""SWE tasks: loading SWE-Gym / SWE-bench rows through `datasets` and normalising them.

A source is the shipped fixture tasks (`"fixtures"`), a local JSON / JSONL / parquet file, or a
Hub dataset name (`SWE-Gym/SWE-Gym`, `SWE-bench/SWE-bench_Lite`, ...). Every source goes through
`datasets.load_dataset`, so a local file with the Hub columns behaves exactly like the Hub dataset.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from gymenvs.container.datasets import load_rows as load_dataset_rows

FIXTURES = "fixtures"
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "test_patch", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS")
_TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")  # may be null (SWE-Gym): read as no test
_STRING_FIELDS = ("instance_id", "repo", "base_commit", "test_patch", "problem_statement")
_DIFF_HEADER = re.compile(r"^diff --git a/.* b/(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Task:
    """One SWE-Gym / SWE-bench instance, with the test lists as real lists."""

    instance_id: str
    repo: str
    base_commit: str
    test_patch: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    patch: str = ""
    version: str | None = None
    environment_setup_commit: str | None = None
    image: str | None = None
    hints_text: str = ""
    #: Optional row fields that override how the tests run: `test_cmd` and `log_parser`.
    test_cmd: str | None = None
    log_parser: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def test_files(self) -> list[str]:
        """The files `test_patch` touches, in order: the test directives SWE-bench runs."""
        return list(dict.fromkeys(_DIFF_HEADER.findall(self.test_patch)))


def task_from_row(row: Mapping[str, Any], where: str = "row") -> Task:
    """A `Task` from a dataset row; `ValueError` naming the row and the missing or malformed fields."""
    missing = [name for name in REQUIRED_FIELDS if name not in row or (row[name] is None and name not in _TEST_LISTS)]
    if missing:
        label = f"{where} (instance_id={row.get('instance_id')!r})" if row.get("instance_id") else where
        raise ValueError(f"{label} lacks required field(s) {missing}; a task needs {list(REQUIRED_FIELDS)}")
    known = {f for f in Task.__dataclass_fields__ if f not in ("fail_to_pass", "pass_to_pass", "extra")}
    values = {name: row[name] for name in known if row.get(name) is not None}
    for name in _STRING_FIELDS:
        if not isinstance(values[name], str) or (name != "problem_statement" and not values[name].strip()):
            raise ValueError(f"{where} (instance_id={row.get('instance_id')!r}): field {name!r} must be a non-empty string")
    if "version" in values:
        values["version"] = str(values["version"])  # some exports store "0.1" as a number
    return Task(
        **values,
        fail_to_pass=parse_test_list(row["FAIL_TO_PASS"], "FAIL_TO_PASS", where),
        pass_to_pass=parse_test_list(row["PASS_TO_PASS"], "PASS_TO_PASS", where),
        extra={k: v for k, v in row.items() if k not in known and k not in _TEST_LISTS},
    )


def task_to_row(task: Task) -> dict[str, Any]:
    """The dataset row of `task` (test lists as real lists, the row's other fields kept): `task_from_row`
    reads it back as the same task."""
    row = {name: getattr(task, name) for name in Task.__dataclass_fields__
           if name not in ("fail_to_pass", "pass_to_pass", "extra") and getattr(task, name) is not None}
    return {**row, "FAIL_TO_PASS": list(task.fail_to_pass), "PASS_TO_PASS": list(task.pass_to_pass), **task.extra}



def parse_test_list(value: Any, name: str = "tests", where: str = "row") -> tuple[str, ...]:
    """A test list as SWE-bench (a JSON string), SWE-Gym (a list) or a null cell gives it."""
    if value is None:
        return ()
    if isinstance(value, str):
        if not value.strip():
            return ()
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: {name} is a string but not a JSON list: {exc}") from None
    if isinstance(value, str) or not isinstance(value, Iterable) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{where}: {name} must be a list of test names, got {type(value).__name__}")
    return tuple(value)


def load_tasks(source: str = FIXTURES, *, split: str | None = None) -> tuple[Task, ...]:
    """Every task of `source`: "fixtures", a local .json/.jsonl/.parquet file, or a Hub dataset name."""
    with _LOADING:  # `datasets.load_dataset` is not thread-safe: the slots of a thread vector env load at once
        return _load_tasks_cached(str(source), split)


_LOADING = threading.Lock()


@cache
def _load_tasks_cached(source: str, split: str | None) -> tuple[Task, ...]:
    rows = load_rows(source, split)
    tasks = tuple(task_from_row(row, f"{source} row {i}") for i, row in enumerate(rows))
    if not tasks:
        raise ValueError(f"dataset {source!r} holds no task")
    seen: set[str] = set()
    for task in tasks:
        if task.instance_id in seen:
            raise ValueError(f"dataset {source!r} holds instance_id {task.instance_id!r} twice")
        seen.add(task.instance_id)
    return tasks


def fixtures_path() -> Path:
    """The directory of the shipped fixture tasks (`tasks.jsonl` and the repos they start from)."""
    return Path(str(resources.files("gymenvs.swe.tasks").joinpath("fixtures")))


def load_rows(source: str, split: str | None) -> Sequence[Mapping[str, Any]]:
    """The rows of "fixtures" (the shipped tasks), a local .json/.jsonl/.parquet file or a Hub dataset."""
    return load_dataset_rows(fixtures_path() / "tasks.jsonl" if source == FIXTURES else source, split)

