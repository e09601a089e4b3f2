"""Parity with the official SWE-bench harness (the `swebench` package, 5.0.2) on real test logs.

The logs in data/parity/ were written by real runners in containers (data/parity/record.py):
pytest 7.2 and 8.3, a real package's suite, pytest that cannot start, Django's runtests.py and
sympy's test runner. For every log, our parser must give the harness parser's statuses, and for
every list of tests drawn from the log (each test alone, all of them, ids cut inside their
brackets, a test that is not there) our verdict must be the harness's: the same success / failure
split, the same resolution, and the same judgement of whether the log can be graded at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.types import TestSpec as HarnessSpec

from gymenvs.swe.grading.logparsers import XPASS
from gymenvs.swe.grading.report import Verdict, invalid_log_reason
from gymenvs.swe.grading.specs import log_parser

PARITY = Path(__file__).parent / "data" / "parity"
MANIFEST = json.loads((PARITY / "manifest.json").read_text())
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"
EXIT_CODE = re.compile(r">>>>> Test Exit Code:\s*(-?\d+)")


def harness_spec(parser: str, f2p=(), p2p=()) -> HarnessSpec:
    return HarnessSpec(instance_id="parity", image="", eval_script_list=[], repo="", version="",
                       FAIL_TO_PASS=list(f2p), PASS_TO_PASS=list(p2p), log_parser=parser, eval_type="pass_and_fail")


def our_statuses(log: str, parser: str) -> dict[str, str]:
    """As grading reads a log: the test section, else (as the harness does) the whole log."""
    parse = log_parser(parser)
    return parse(log.split(START, 1)[1].split(END, 1)[0]) or parse(log)


def our_verdict(log: str, parser: str, f2p, p2p):
    statuses = our_statuses(log, parser)
    match = EXIT_CODE.search(log)
    if invalid_log_reason(statuses, int(match[1]) if match else None):
        return False, None, None
    report = Verdict.from_statuses(statuses, f2p, p2p)
    return True, report.tests_status(), report.resolution()


def harness_verdict(path: Path, parser: str, f2p, p2p):
    statuses, found = get_logs_eval(harness_spec(parser, f2p, p2p), str(path))
    if not found:
        return False, None, None
    report = get_eval_tests_report(statuses, {"FAIL_TO_PASS": list(f2p), "PASS_TO_PASS": list(p2p)})
    return True, {key: report[key] for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}, get_resolution_status(report)


def lists_to_grade(statuses: dict[str, str]) -> list[tuple[list[str], list[str]]]:
    """(FAIL_TO_PASS, PASS_TO_PASS) pairs to grade: each test alone in each list, all, and truncations."""
    names = sorted(statuses)
    truncated = sorted({name[: name.index("[") + cut] for name in names if "[" in name for cut in (1, 2)})
    names = list(dict.fromkeys([*names, *truncated, "tests/test_absent.py::test_absent",
                                "test_absent (absent.tests.Case.test_absent)"]))
    lists = [([name], []) for name in names] + [([], [name]) for name in names]
    passing = [name for name in names if statuses.get(name) == "PASSED"]
    return lists + [(names, []), ([], names), (passing, names), (passing[:1], passing[1:])]


def compare(name: str) -> tuple[int, int, list[str]]:
    """(statuses compared, verdicts compared, disagreements) for one recorded log."""
    path, parser = PARITY / f"{name}.log", MANIFEST[name]
    log = path.read_text()
    section = log.split(START, 1)[1].split(END, 1)[0]
    theirs = PARSER_REGISTRY[parser](section, harness_spec(parser)) or PARSER_REGISTRY[parser](log, harness_spec(parser))
    ours = {test: status for test, status in our_statuses(log, parser).items() if status != XPASS}
    disagreements = [f"{name}: {test}: ours {ours.get(test)}, harness {theirs.get(test)}"
                     for test in sorted(set(ours) | set(theirs)) if ours.get(test) != theirs.get(test)]
    lists = lists_to_grade(theirs)
    for f2p, p2p in lists:
        if our_verdict(log, parser, f2p, p2p) != harness_verdict(path, parser, f2p, p2p):
            disagreements.append(f"{name}: F2P={f2p[:3]} P2P={p2p[:3]}: ours {our_verdict(log, parser, f2p, p2p)}, "
                                 f"harness {harness_verdict(path, parser, f2p, p2p)}")
    return len(set(ours) | set(theirs)), len(lists), disagreements


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_statuses_and_verdicts_equal_the_harness(name):
    statuses, verdicts, disagreements = compare(name)
    assert statuses > 0 or name.startswith("pytest7_plugin")
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.slow  # the per-log tests above compare the same logs in the quick lane; this sums them for the docs
def test_parity_figures(capsys):
    """The figures of the parity suite (`pytest -s` prints them)."""
    totals = [compare(name) for name in sorted(MANIFEST)]
    with capsys.disabled():
        print(f"\nparity: {len(totals)} logs, {sum(t[0] for t in totals)} statuses, {sum(t[1] for t in totals)} "
              f"verdicts compared, {sum(len(t[2]) for t in totals)} disagreements")
    assert sum(len(t[2]) for t in totals) == 0


def test_the_logs_cover_what_the_issue_names():
    """Real runs that hold every case: XPASS without " - ", ids with spaces, skips, a run that could not start."""
    pytest7 = (PARITY / "pytest7_statuses.log").read_text()
    assert "\nXPASS tests/test_statuses.py::test_xpasses fixed already" in pytest7  # pytest 7.2: no " - "
    assert "\nPASSED tests/test_statuses.py::test_params[x y]" in pytest7
    assert our_statuses(pytest7, "parse_log_pytest")["tests/test_statuses.py::test_xpasses"] == XPASS
    assert "Exit Code: 4" in (PARITY / "pytest7_config_needs_plugin.log").read_text()
    django = our_statuses((PARITY / "django_runtests.log").read_text(), "parse_log_django")
    assert {"PASSED", "FAILED", "ERROR", "SKIPPED"} <= set(django.values())
    sympy = our_statuses((PARITY / "sympy_test.log").read_text(), "parse_log_sympy")
    assert {"PASSED", "FAILED", "ERROR"} <= set(sympy.values())
