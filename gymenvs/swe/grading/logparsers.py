"""Test logs read into {test name: status}, keyed as the SWE-bench harness keys them.

The FAIL_TO_PASS / PASS_TO_PASS lists of SWE-bench and SWE-Gym were made by the harness's own
parsers, so a test is named here exactly as they name it (tests/swe/test_parity.py checks it
on real logs against the `swebench` package):

- pytest `-rA` short summary: the test is the first word after the status (`PASSED t.py::test_e[x y]`
  gives `t.py::test_e[x`, the truncated ids some datasets hold); `FAILED ... - message` drops
  the message; `SKIPPED [1] file:line: why` names no test. `XPASS` lines are kept as XPASS, which
  the harness does not read: both grade such a test as not passing.
- Django's runner at verbosity 2: `test_a (app.tests.Case) ... ok` (the status may come on a
  later line), `FAIL:` / `ERROR:` headers (keyed by their first word, as the harness does).
- sympy's `bin/test --verbose`: `test_a ok|F|E`, and `___ path.py:test_b ___` failure headers.
  Skips (`s`) and expected failures (`f`) are not named, as in the harness.

A test absent from the map did not run (or was not named): grading counts it as failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

PASSED, FAILED, SKIPPED, ERROR, XFAIL, XPASS = "PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"
#: The statuses the harness records (XPASS is ours: it grades like a missing test).
HARNESS_STATUSES = (FAILED, PASSED, SKIPPED, ERROR, XFAIL)

_PYTEST_STATUSES = (*HARNESS_STATUSES, XPASS)
_SKIP_COUNT = re.compile(r"^\[\d+\]$")  # "SKIPPED [3] file:line: reason" counts skips, names no test
_DJANGO_PASS = (" ... ok", " ... OK", " ...  OK")
_DJANGO_INTERRUPTED = (  # a result line split by output Django prints mid-test; the harness reads these
    r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$",
)
_SYMPY_FAILURE_HEADER = re.compile(r"(_*) (.*)\.py:(.*) (_*)")
_SYMPY_RESULT = {"E": ERROR, "F": FAILED, "ok": PASSED}


def parse_pytest(log: str) -> dict[str, str]:
    """Statuses from pytest's `-rA` short test summary: lines that start with a status word.

    Like the harness, every line of the log is read and the last word for a test wins; the
    summary comes last, so a line a test prints cannot change a test pytest reports.
    """
    statuses: dict[str, str] = {}
    for line in log.split("\n"):
        if not line.startswith(_PYTEST_STATUSES):
            continue
        words = (line.replace(" - ", " ") if line.startswith(FAILED) else line).split()
        if len(words) > 1 and not (words[0] == SKIPPED and _SKIP_COUNT.match(words[1])):
            statuses[words[1]] = words[0]
    return statuses


def parse_django(log: str) -> dict[str, str]:
    """Statuses from Django's `runtests.py --verbosity 2` (unittest's verbose format)."""
    statuses: dict[str, str] = {}
    previous: str | None = None  # the last test whose " ... " line was seen
    for raw_line in log.split("\n"):
        line = raw_line.strip()
        if "--version is equivalent to version" in line:
            statuses["--version is equivalent to version"] = PASSED
        if " ... " in line:
            previous = line.split(" ... ")[0]
        for suffix in _DJANGO_PASS:
            if line.endswith(suffix):
                statuses[line.rsplit(suffix, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            statuses[line.split(" ... skipped")[0]] = SKIPPED
        for word, status in (("FAIL", FAILED), ("ERROR", ERROR)):
            if line.endswith(f" ... {word}"):
                statuses[line.split(f" ... {word}")[0]] = status
            if line.startswith(f"{word}:") and len(line.split()) > 1:
                statuses[line.split()[1]] = status
        if line.startswith("ok") and previous is not None:  # "ok" after output the test printed
            statuses[previous] = PASSED
    for pattern in _DJANGO_INTERRUPTED:
        for match in re.finditer(pattern, log, re.MULTILINE):
            statuses[match[1]] = PASSED
    return statuses


def parse_sympy(log: str) -> dict[str, str]:
    """Statuses from sympy's `bin/test --verbose` (`test_name ok|F|E`; failure headers name files)."""
    statuses = {f"{match[1]}.py:{match[2]}": FAILED for match in _SYMPY_FAILURE_HEADER.findall(log)}
    for raw_line in log.split("\n"):
        line = raw_line.strip()
        words = line.split()
        if line.startswith("test_") and words[-1] in _SYMPY_RESULT and len(words) > 1:
            statuses[words[0]] = _SYMPY_RESULT[words[-1]]
    return statuses


PARSERS: dict[str, Callable[[str], dict[str, str]]] = {"pytest": parse_pytest, "django": parse_django, "sympy": parse_sympy}
