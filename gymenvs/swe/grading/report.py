"""Verdicts on a test log, reached as the SWE-bench harness (5.x) reaches them.

- A listed test is looked up exactly; a test id cut inside its brackets (`test_e[log(photon`,
  as hundreds of SWE-bench Verified ids are) matches the tests it is a prefix of, when they agree
  on pass or fail.
- FAIL_TO_PASS passes on PASSED or XFAIL; a skipped, failed, errored, XPASS or missing test fails.
  PASS_TO_PASS also keeps a SKIPPED test (a skip is not a regression). `pytest -rA` names no
  skipped test, so there a skip counts as missing, as in the harness.
- A log the harness would reject is no verdict but an error: nothing parsed, or a failing test
  command whose log shows no failing test (the command could not run, or the log was forged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gymenvs.swe.grading.logparsers import ERROR, FAILED, HARNESS_STATUSES, PASSED, SKIPPED, XFAIL, XPASS

MISSING = "MISSING"
PASSING = frozenset({PASSED, XFAIL})
MAINTAINED = PASSING | {SKIPPED}
#: What counts against a test (XPASS, which the harness never reads, as missing). Any other status
#: (a line the harness misread, such as "ERROR: usage: ...") counts neither way, as in the harness.
FAILING = frozenset({FAILED, ERROR, SKIPPED, MISSING, XPASS})
RESOLVED_FULL, RESOLVED_PARTIAL, RESOLVED_NO = "RESOLVED_FULL", "RESOLVED_PARTIAL", "RESOLVED_NO"


def lookup(test: str, statuses: Mapping[str, str]) -> str:
    """The status of a listed test: exact, else by prefix for an id cut inside its brackets."""
    if test in statuses:
        return statuses[test]
    if test.count("[") > test.count("]"):
        matches = [name for name, status in statuses.items() if name.startswith(test) and status in HARNESS_STATUSES]
        if matches and len({statuses[name] in PASSING for name in matches}) == 1:
            return statuses[matches[0]]
    return MISSING


@dataclass
class Verdict:
    """Each listed test with the status it had, and the verdict they give."""

    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_statuses(cls, statuses: Mapping[str, str], fail_to_pass: Iterable[str],
                      pass_to_pass: Iterable[str]) -> Verdict:
        return cls({t: lookup(t, statuses) for t in fail_to_pass}, {t: lookup(t, statuses) for t in pass_to_pass})

    def tests_status(self) -> dict[str, dict[str, list[str]]]:
        """The harness's report shape: each list split into success and failure."""
        return {"FAIL_TO_PASS": _split(self.fail_to_pass, PASSING), "PASS_TO_PASS": _split(self.pass_to_pass, MAINTAINED)}

    def resolution(self) -> str:
        """RESOLVED_FULL, RESOLVED_PARTIAL or RESOLVED_NO, from the share of each list that passed."""
        split = self.tests_status()
        f2p, p2p = _share(split["FAIL_TO_PASS"]), _share(split["PASS_TO_PASS"])
        if f2p == 1 and p2p == 1:
            return RESOLVED_FULL
        return RESOLVED_PARTIAL if 0 < f2p < 1 and p2p == 1 else RESOLVED_NO


def invalid_log_reason(statuses: Mapping[str, str], exit_code: int | None) -> str | None:
    """Why the harness would reject this log rather than grade it, or None when it is gradable."""
    failed = exit_code not in (0, None)
    if failed and not any(status in HARNESS_STATUSES for status in statuses.values()):
        return f"the test command failed (exit {exit_code}) and its log names no test: the tests could not run"
    if not statuses:
        return "the test log names no test"
    if failed and not {FAILED, ERROR} & set(statuses.values()):
        return f"the test command failed (exit {exit_code}) but its log shows no failing test"
    return None


def _split(statuses: Mapping[str, str], passing: frozenset[str]) -> dict[str, list[str]]:
    return {"success": [t for t, s in statuses.items() if s in passing],
            "failure": [t for t, s in statuses.items() if s not in passing and s in FAILING]}


def _share(split: Mapping[str, list[str]]) -> float:
    total = len(split["success"]) + len(split["failure"])
    return 1.0 if total == 0 else len(split["success"]) / total
