"""How a task's tests run: the command, and the parser that reads its log.

Each comes from the first of these that has it:

1. the row itself: `test_cmd` and `log_parser` (one of ours, or a `swebench` parser name such as
   "parse_log_astropy");
2. the row's `eval_script` (SWE-bench 5.x datasets carry one per instance): the command is the
   line(s) between its test-output markers;
3. the `swebench` package, when installed (`pip install 'gymenvs[swebench]'`): its repo -> log
   parser table (5.x ships no per-version test commands: its datasets carry the eval script);
4. a built-in default: the harness's commands for Django, sympy, astropy and sphinx, else
   `pytest -rA` (local repos, SWE-Gym's), on the test files `test_patch` touches.

A parser name that is neither ours nor the installed `swebench` package's is a `ValueError`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from gymenvs.swe.grading.logparsers import PARSERS
from gymenvs.swe.tasks.tasks import Task

DJANGO_TEST_CMD = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
SYMPY_TEST_CMD = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
PYTEST_TEST_CMD = "pytest -rA"
_BUILT_IN = {  # the harness's commands for the repos that do not run a bare `pytest -rA`
    "django/django": (DJANGO_TEST_CMD, "django"),
    "sympy/sympy": (SYMPY_TEST_CMD, "sympy"),
    "astropy/astropy": ("pytest -rA -vv -o console_output_style=classic --tb=no", "pytest"),
    "sphinx-doc/sphinx": ("tox --current-env -epy39 -v --", "pytest"),
}
#: The harness's own parser names for the formats we parse ourselves.
_OURS_BY_HARNESS_NAME = {"parse_log_pytest": "pytest", "parse_log_django": "django", "parse_log_sympy": "sympy"}
#: Extensions the harness never passes to the test command (data files a test patch touches).
_NOT_TESTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
_TEST_OUTPUT = re.compile(r">>>>> Start Test Output'?\s*\n(.*?)\n[^\n]*>>>>> End Test Output", re.DOTALL)


@dataclass(frozen=True)
class TestSpec:
    """What grading runs for a task: `command`, whose log `parser` reads."""

    command: str
    parser: str

    def parse(self, log: str) -> dict[str, str]:
        return log_parser(self.parser)(log)


def spec_for(task: Task) -> TestSpec:
    """The test spec of `task` (see the module docstring for where each part comes from)."""
    default_command, default_parser = _BUILT_IN.get(task.repo, (PYTEST_TEST_CMD, "pytest"))
    parser = task.log_parser or _harness_parser(task.repo) or default_parser
    command = task.test_cmd or _eval_script_command(task.extra.get("eval_script"))
    if command is None:
        command = " ".join([default_command, *map(shlex.quote, test_directives(task))])
    log_parser(parser)  # a ValueError now, not at grading time
    return TestSpec(command, parser)


def test_directives(task: Task) -> list[str]:
    """What the harness passes to the test command: the test files, as Django labels for Django."""
    files = [path for path in task.test_files if not path.endswith(_NOT_TESTS)]
    if task.repo == "django/django":
        return [path.removesuffix(".py").removeprefix("tests/").replace("/", ".") for path in files]
    return files


def log_parser(name: str) -> Callable[[str], dict[str, str]]:
    """Our parser `name`, else the `swebench` package's parser of that name; `ValueError` if neither."""
    name = _OURS_BY_HARNESS_NAME.get(name, name)
    if name in PARSERS:
        return PARSERS[name]
    registry = _harness_parsers()
    if name in registry:
        return lambda log: registry[name](log, None)
    hint = "" if registry else " (install 'gymenvs[swebench]' for the harness's parsers)"
    raise ValueError(f"log_parser {name!r} is not one of {sorted(PARSERS) + sorted(registry)}{hint}")


def _eval_script_command(eval_script: Any) -> str | None:
    if not isinstance(eval_script, str):
        return None
    match = _TEST_OUTPUT.search(eval_script)
    return match[1].strip() if match and match[1].strip() else None


def _harness_parser(repo: str) -> str | None:
    """The harness's parser for `repo`, by name, when `swebench` is installed and knows the repo."""
    parser = _harness_repo_parsers().get(repo)
    return None if parser is None else _OURS_BY_HARNESS_NAME.get(parser.__name__, parser.__name__)


@cache
def _harness_parsers() -> dict[str, Callable[..., dict[str, str]]]:
    try:
        from swebench.harness.log_parsers import PARSER_REGISTRY
    except ImportError:
        try:  # 4.x has no registry by name: gather its parser functions
            from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
        except ImportError:
            return {}
        return {parser.__name__: parser for parser in MAP_REPO_TO_PARSER.values()}
    return dict(PARSER_REGISTRY)


@cache
def _harness_repo_parsers() -> dict[str, Callable[..., dict[str, str]]]:
    try:
        from swebench.harness.log_parsers import python
    except ImportError:
        return {}
    table = getattr(python, "MAP_REPO_TO_PARSER_PY", None) or getattr(python, "MAP_REPO_TO_PARSER", {})
    return dict(table)

