"""Validate a dataset's tasks before training on them, as SWE-bench and SWE-Gym do before publishing one.

Each task is graded by the ordinary grading path (`gymenvs.swe.grading.grade`), `runs` times with the
empty patch and `runs` times with its gold patch, and the per-test statuses of those reports are
held to these rules (named in the report when broken, with the tests that broke them):

    flaky                       a test's status changed between runs of the same patch
    gold_patch_does_not_apply   the gold patch does not apply to the base commit
    gold_screened               grading's static screen zeroes the gold patch (status "screened")
    tampered                    a run (gold or empty) tripped grading's runtime integrity check
    gold_does_not_resolve       a run with the gold patch did not resolve the task
    empty_patch_resolves        a run with the empty patch resolved the task
    fail_to_pass_passes_before  a FAIL_TO_PASS test passed without the gold patch
    fail_to_pass_fails_after    a FAIL_TO_PASS test did not pass with the gold patch
    pass_to_pass_fails_before   a PASS_TO_PASS test failed without the gold patch
    pass_to_pass_fails_after    a PASS_TO_PASS test failed with the gold patch

A flaky test is reported under `flaky` only, not again under the four per-test rules. A run that
could not grade (an engine error, a timeout, a log the harness would reject) gives no verdict: the
task's status is `error`, and a rerun tries it again. The report is JSONL, one line per task
(`TaskValidation.to_dict`); a rerun with the same report skips the tasks it already judged.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence

from gymenvs.container.validation import ERROR, INVALID, VALID, BrokenRule, RunEvidence, TaskValidation
from gymenvs.swe.grading.grading import GradeReport
from gymenvs.swe.grading.report import MAINTAINED, PASSING
from gymenvs.swe.tasks.tasks import Task

#: Every rule, in the order a report names them (the first names the task's `rule`).
RULES = (
    "flaky",
    "gold_patch_does_not_apply",
    "gold_screened",
    "tampered",
    "gold_does_not_resolve",
    "empty_patch_resolves",
    "fail_to_pass_passes_before",
    "fail_to_pass_fails_after",
    "pass_to_pass_fails_before",
    "pass_to_pass_fails_after",
)
_GRADED = ("resolved", "unresolved")
#: Verdicts grading gives every time (the model's, reward 0): a gold patch or a repository they hit is a broken task.
_ZEROED = ("screened", "tampered")

#: Grades one patch of one task: `(task, diff) -> GradeReport`.
Grader = Callable[[Task, str], GradeReport]


def fingerprint(task: Task) -> str:
    """A digest of what decides a task's verdict: its repository, commit, patches, test lists, image and test command."""
    fields = (task.repo, task.base_commit, task.patch, task.test_patch, task.fail_to_pass, task.pass_to_pass, task.image,
              task.version, task.test_cmd, task.log_parser)
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:16]


def validate_task(task: Task, grade_one: Grader, runs: int = 1) -> TaskValidation:
    """Grade `task` `runs` times with the empty patch and with its gold patch, and judge the reports.
    An exception of `grade_one` is an `error` verdict: one task does not stop the others."""
    started = time.monotonic()
    empty: list[GradeReport] = []
    gold: list[GradeReport] = []
    try:
        for _ in range(runs):
            empty.append(grade_one(task, ""))
            gold.append(grade_one(task, task.patch))
    except Exception as exc:
        verdict = TaskValidation(task.instance_id, ERROR, runs=runs, error=f"grading raised {type(exc).__name__}: {exc}")
    else:
        verdict = judge(task, empty, gold)
    verdict.seconds, verdict.fingerprint = time.monotonic() - started, fingerprint(task)
    return verdict


def judge(task: Task, empty: Sequence[GradeReport], gold: Sequence[GradeReport]) -> TaskValidation:
    """The verdict on `task` from its graded runs (as many with the empty patch as with the gold)."""
    verdict = TaskValidation(task.instance_id, VALID, runs=len(gold), empty_runs=[r.status for r in empty],
                             gold_runs=[r.status for r in gold])
    failed = [r for r in empty if r.status not in (*_GRADED, *_ZEROED)] + [
        r for r in gold if r.status not in (*_GRADED, *_ZEROED, "patch_failed")]
    if failed:
        verdict.status, verdict.error = ERROR, f"{failed[0].status}: {failed[0].error}"
        verdict.evidence = _runs_evidence(empty, gold)
        return verdict
    broken: dict[str, BrokenRule] = {}
    refused = [r for r in gold if r.status == "patch_failed"]
    if refused:
        broken["gold_patch_does_not_apply"] = BrokenRule("gold_patch_does_not_apply", detail=refused[0].error or "")
    screened = [r for r in gold if r.status == "screened"]
    if screened:
        broken["gold_screened"] = BrokenRule("gold_screened", detail=screened[0].error or "")
    tampered = [r for r in (*empty, *gold) if r.status == "tampered"]
    if tampered:
        broken["tampered"] = BrokenRule("tampered", detail=tampered[0].error or "")
    else:
        broken.update(_test_rules(task, empty, gold))
        if not all(r.resolved for r in gold):
            broken["gold_does_not_resolve"] = BrokenRule("gold_does_not_resolve", _not_passing(task, gold),
                                                         f"resolved in {sum(r.resolved for r in gold)} of {len(gold)} run(s)")
    if any(r.resolved for r in empty):
        broken["empty_patch_resolves"] = BrokenRule("empty_patch_resolves",
                                                    detail=f"resolved in {sum(r.resolved for r in empty)} of {len(empty)} run(s)")
    verdict.broken = [broken[rule] for rule in RULES if rule in broken]
    verdict.status = INVALID if verdict.broken else VALID
    if verdict.broken:
        verdict.evidence = _runs_evidence(empty, gold)
    return verdict


def _runs_evidence(empty: Sequence[GradeReport], gold: Sequence[GradeReport]) -> list[RunEvidence]:
    """What each graded run showed, in the order run (empty, gold, empty, gold...)."""
    return [RunEvidence.of(run, "the test command", r.test_exit_code, r.reward, r.status, r.log_tail)
            for pair in zip(empty, gold) for run, r in zip(("empty", "gold"), pair)]


def _test_rules(task: Task, empty: Sequence[GradeReport], gold: Sequence[GradeReport]) -> dict[str, BrokenRule]:
    """The flaky rule and the four per-test rules, from each listed test's statuses over the runs."""
    rules: dict[str, BrokenRule] = {}
    before, after = _flaky(empty, "empty patch"), _flaky(gold, "gold patch")
    flaky = {name: "; ".join(filter(None, (before.get(name), after.get(name)))) for name in {*before, *after}}
    if flaky:
        rules["flaky"] = BrokenRule("flaky", tuple(sorted(flaky)), "; ".join(flaky[name] for name in sorted(flaky)))
    checks = (("fail_to_pass_passes_before", task.fail_to_pass, empty, False),
              ("fail_to_pass_fails_after", task.fail_to_pass, gold, True),
              ("pass_to_pass_fails_before", task.pass_to_pass, empty, True),
              ("pass_to_pass_fails_after", task.pass_to_pass, gold, True))
    for rule, tests, reports, must_pass in checks:
        seen = {t: _statuses_of(t, reports) for t in tests if t not in flaky}
        found = [t for t, statuses in seen.items() if _passes(t, statuses[0], task) != must_pass]
        if found:
            rules[rule] = BrokenRule(rule, tuple(found), "; ".join(f"{t}: {seen[t][0]}" for t in found))
    return rules


def _flaky(reports: Sequence[GradeReport], patch: str) -> dict[str, str]:
    """{test: what was seen} of the listed tests whose status changed between runs of one patch."""
    names = dict.fromkeys(name for r in reports for name in (*r.fail_to_pass, *r.pass_to_pass))
    changed = {name: _statuses_of(name, reports) for name in names}
    return {name: f"{name}: {' / '.join(s)} with the {patch}" for name, s in changed.items() if len(set(s)) > 1}


def _statuses_of(test: str, reports: Sequence[GradeReport]) -> list[str]:
    return [r.fail_to_pass.get(test) or r.pass_to_pass.get(test) or "MISSING" for r in reports]


def _passes(test: str, status: str, task: Task) -> bool:
    """Whether `status` counts as a pass for `test` (a skip keeps a PASS_TO_PASS test, as in the harness)."""
    return status in (PASSING if test in task.fail_to_pass else MAINTAINED)


def _not_passing(task: Task, gold: Sequence[GradeReport]) -> tuple[str, ...]:
    """The listed tests that did not pass in some gold run."""
    return tuple(t for t in (*task.fail_to_pass, *task.pass_to_pass)
                 if any(not _passes(t, s, task) for s in _statuses_of(t, gold)))
