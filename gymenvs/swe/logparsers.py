"""Test logs read into {test name: status}, for the three formats SWE-bench grades.

- pytest with `-rA`: the short test summary (`PASSED tests/x.py::test_a`, `FAILED ... - message`);
- Django's runner at verbosity 2 (unittest): `test_a (app.tests.Case) ... ok`, with the status
  sometimes on a later line when the test printed something;
- sympy's `bin/test --verbose`: `test_a ok`, `test_b F`, and `___ path.py:test_b ___` headers.

Test names are keyed exactly as the runner prints them, which is how SWE-bench's FAIL_TO_PASS and
PASS_TO_PASS lists name them. A test absent from the map did not run: grading counts it as failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

PASSED, FAILED, SKIPPED, ERROR, XFAIL, XPASS = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"
#: Statuses that count as a pass for a FAIL_TO_PASS test (a skipped one does not).
PASSING = frozenset({PASSED, XFAIL, XPASS})

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PYTEST_SUMMARY = re.compile(r"^=+ short test summary info =+\s*$", re.MULTILINE)
_PYTEST_SECTION = re.compile(r"^=+ (?!test session starts)[^=\n]+ =+\s*$", re.MULTILINE)  # FAILURES, PASSES...
_PYTEST_RA_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S.*)$")
_PYTEST_VERBOSE_LINE = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b")
_DJANGO_RESULT = {"ok": PASSED, "OK": PASSED, "FAIL": FAILED, "ERROR": ERROR, "expected failure": XFAIL,
                  "unexpected success": FAILED}
_DJANGO_HEADER = re.compile(r"^(FAIL|ERROR): (.+)$")
_SYMPY_RESULT = {"ok": PASSED, "F": FAILED, "E": ERROR, "s": SKIPPED, "f": XFAIL, "X": XPASS}
_SYMPY_FAILURE_HEADER = re.compile(r"^_+ (\S+\.py:\S+) _+$")
_SYMPY_FILE_RESULT = re.compile(r"\s+\[(?:OK|FAIL)\]$")


def parse_pytest(log: str) -> dict[str, str]:
    """Statuses from pytest's `-v` progress lines and its `-rA` short summary (which wins).

    Each is read only where pytest writes it: progress lines before the first report section,
    summary lines after the last summary header. So output a test prints (shown in the FAILURES
    or PASSES sections) cannot pose as a result.
    """
    log = _ANSI.sub("", log)
    statuses: dict[str, str] = {}
    sections = _PYTEST_SECTION.search(log)
    for line in log[: sections.start() if sections else len(log)].splitlines():
        match = _PYTEST_VERBOSE_LINE.match(line.strip())
        if match:
            statuses[match[1]] = match[2]
    summaries = list(_PYTEST_SUMMARY.finditer(log))
    for line in log[summaries[-1].end() :].splitlines() if summaries else ():
        match = _PYTEST_RA_LINE.match(line.strip())
        if match and not (match[1] == SKIPPED and match[2].startswith("[")):  # "SKIPPED [1] file:line: why"
            statuses[_pytest_node_id(match[2])] = match[1]
    return statuses


def _pytest_node_id(rest: str) -> str:
    """`tests/x.py::test[a - b] - AssertionError` -> the node id: cut at the first " - " outside brackets."""
    depth = 0
    for i, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif depth == 0 and rest.startswith(" - ", i):
            return rest[:i]
    return rest.strip()


def parse_django(log: str) -> dict[str, str]:
    """Statuses from Django's `runtests.py --verbosity 2` (unittest's verbose format)."""
    statuses: dict[str, str] = {}
    waiting: str | None = None  # a test whose " ... " line ended before its result
    for raw_line in _ANSI.sub("", log).splitlines():
        line = raw_line.strip()
        header = _DJANGO_HEADER.match(line)
        if header:
            statuses[header[2]] = FAILED if header[1] == "FAIL" else ERROR
            continue
        if " ... " in line:
            name, _, result = line.partition(" ... ")
            status = _django_status(result)
            if status:
                statuses[name] = status
                waiting = None
            else:
                waiting = name
        elif waiting is not None:
            status = _django_status(line)
            if status:
                statuses[waiting] = status
                waiting = None
    return statuses


def _django_status(result: str) -> str | None:
    """The status a verbose unittest result names, even after other output (`... noise ok`)."""
    result = result.strip()
    if result.startswith("skipped") or result.endswith("skipped"):
        return SKIPPED
    for word, status in _DJANGO_RESULT.items():
        if result == word or result.endswith(" " + word):
            return status
    return None


def parse_sympy(log: str) -> dict[str, str]:
    """Statuses from sympy's `bin/test --verbose` (`test_name ok|F|E|s|f|X`; failure headers name files)."""
    statuses: dict[str, str] = {}
    for raw_line in _ANSI.sub("", log).splitlines():
        line = _SYMPY_FILE_RESULT.sub("", raw_line.strip())
        header = _SYMPY_FAILURE_HEADER.match(line)
        if header:
            statuses[header[1]] = FAILED
            continue
        if line.startswith("test_"):
            name, _, result = line.rpartition(" ")
            if name and result in _SYMPY_RESULT:
                statuses[name.split()[0]] = _SYMPY_RESULT[result]
    return statuses


PARSERS: dict[str, Callable[[str], dict[str, str]]] = {"pytest": parse_pytest, "django": parse_django, "sympy": parse_sympy}
