"""Host-side grading, as SWE-bench resolves an instance, in a fresh container from the task image.

1. The agent's diff (from its container) loses every protected change (`patches.filter_diff`).
2. A new container starts from the pristine task image: the agent's container, and anything it
   left running or wrote there (a conftest.py, a reward file), plays no part.
3. The eval script applies the diff, resets the files `test_patch` touches to `base_commit`,
   applies `test_patch` and runs the tests, framed by markers that carry a fresh nonce.
4. The log is parsed on the host and judged as the SWE-bench harness judges it (`report`): the
   task is resolved only if every FAIL_TO_PASS test passes and no PASS_TO_PASS test fails or goes
   missing; a log the harness would reject is an error, not a failing agent.
"""

from __future__ import annotations

import shlex
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from gymenvs.swe.images import ENV_SETUP, WORKDIR
from gymenvs.swe.output import decode_output
from gymenvs.swe.patches import filter_diff
from gymenvs.swe.report import RESOLVED_FULL, Verdict, invalid_log_reason
from gymenvs.swe.sandbox import Limits, Sandbox, SandboxError
from gymenvs.swe.specs import spec_for
from gymenvs.swe.tasks import Task

_LOG_LIMIT = 8 << 20
_DIFF_LIMIT = 16 << 20


@dataclass
class GradeReport:
    """What grading found. `fail_to_pass` / `pass_to_pass` map every listed test to its status.

    `status` is "resolved" or "unresolved" (the agent's result), "patch_failed" (its diff does not
    apply), "timeout" (the tests ran out of time) or "error" (infrastructure or a broken task).
    """

    instance_id: str
    status: str
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    #: Paths of the agent's diff that were not applied, with the reason.
    ignored_files: dict[str, str] = field(default_factory=dict)
    patch_is_empty: bool = True
    test_exit_code: int | None = None
    error: str | None = None
    seconds: float = 0.0
    log_tail: str = ""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0

    def tests_status(self) -> dict[str, dict[str, list[str]]]:
        """SWE-bench's report shape: each list split into success and failure."""
        return Verdict(self.fail_to_pass, self.pass_to_pass).tests_status()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "resolved": self.resolved, "tests_status": self.tests_status()}

    def summary(self) -> str:
        counts = self.tests_status()
        f2p, p2p = counts["FAIL_TO_PASS"], counts["PASS_TO_PASS"]
        text = (f"Grading: {self.status}. FAIL_TO_PASS {len(f2p['success'])}/{len(self.fail_to_pass)} passed, "
                f"PASS_TO_PASS {len(p2p['success'])}/{len(self.pass_to_pass)} passed.")
        if self.ignored_files:
            text += f" Not applied (protected): {', '.join(sorted(self.ignored_files))}."
        return text + (f" {self.error}" if self.error else "")


def grade(client: Any, task: Task, diff: str, *, image: str, timeout: float = 1800, limits: Limits = Limits(),
          episode_id: str = "") -> GradeReport:
    """Grade `diff` (the agent's changes against `task.base_commit`) in a fresh container from `image`.

    Infrastructure failures come back as a report with status "error", never as an exception.
    """
    started = time.monotonic()
    kept, ignored = filter_diff(diff, frozenset(task.test_files))
    report = GradeReport(task.instance_id, "error", ignored_files=ignored, patch_is_empty=not kept.strip())
    nonce = uuid.uuid4().hex
    try:
        sandbox = Sandbox(client, image, role="grading", episode_id=episode_id or task.instance_id, limits=limits)
        try:
            sandbox.put_files("/tmp", {
                "gymenvs-agent.diff": kept.encode("utf-8", "surrogateescape"),
                "gymenvs-test.diff": task.test_patch.encode("utf-8", "surrogateescape"),
                "gymenvs-eval.sh": eval_script(task, nonce).encode(),
            })
            result = sandbox.run("bash /tmp/gymenvs-eval.sh", timeout=timeout, output_limit=_LOG_LIMIT)
        finally:
            sandbox.remove()
    except SandboxError as exc:
        report.error = f"grading could not run: {exc}"
        report.seconds = time.monotonic() - started
        return report
    log = decode_output(result.output.raw())
    _read_log(report, task, log, nonce, timed_out=result.timed_out, timeout=timeout)
    report.seconds = time.monotonic() - started
    return report


def extract_diff(sandbox: Sandbox, base_commit: str, timeout: float = 120) -> str:
    """Everything the agent changed in /testbed since `base_commit` (new files included), as a git diff."""
    git = "git -c core.fileMode=false -c core.quotePath=false"
    command = (f"cd {WORKDIR} && {git} add -A && "
               f"{git} diff --cached --binary --no-color --no-ext-diff --no-textconv {shlex.quote(base_commit)}")
    result = sandbox.run(command, timeout=timeout, output_limit=_DIFF_LIMIT)
    if result.timed_out or result.exit_code != 0:
        raise SandboxError(f"could not read the agent's diff (exit {result.exit_code}): {result.output.text()[-1000:]}")
    if result.output.elided:
        raise SandboxError(f"the agent's diff exceeds {_DIFF_LIMIT} bytes")
    return result.output.raw().decode("utf-8", "surrogateescape")


def eval_script(task: Task, nonce: str) -> str:
    """The bash script graded in the fresh container; each step reports through a nonce marker."""
    spec = spec_for(task)
    base = shlex.quote(task.base_commit)
    files = " ".join(map(shlex.quote, task.test_files))
    return f"""#!/bin/bash
set -uo pipefail
{ENV_SETUP}
mark() {{ echo ">>>>> {nonce} $*"; }}
if [ -s /tmp/gymenvs-agent.diff ]; then
  git apply --verbose /tmp/gymenvs-agent.diff || patch --batch --fuzz=5 -p1 -i /tmp/gymenvs-agent.diff \\
    || {{ mark "Patch Apply Failed"; exit 0; }}
fi
for file in {files}; do
  if git cat-file -e {base}:"$file" 2>/dev/null; then git checkout -q {base} -- "$file"; else rm -rf -- "$file"; fi
done
git apply --verbose /tmp/gymenvs-test.diff || {{ mark "Test Patch Apply Failed"; exit 0; }}
{chr(10).join(spec.setup)}
mark "Start Test Output"
{spec.command}
mark "Test Exit Code: $?"
mark "End Test Output"
"""


def _read_log(report: GradeReport, task: Task, log: str, nonce: str, *, timed_out: bool, timeout: float) -> None:
    marker = f">>>>> {nonce} "
    report.log_tail = log[-4000:]
    if timed_out:
        report.status, report.error = "timeout", f"the tests did not finish in {timeout:g} s"
        return
    if marker + "Patch Apply Failed" in log:
        report.status, report.error = "patch_failed", "the agent's diff does not apply to the task's base commit"
        return
    if marker + "Test Patch Apply Failed" in log:
        report.error = "the task's test_patch does not apply: the task is broken"
        return
    start, end = marker + "Start Test Output", marker + "End Test Output"
    if start not in log or end not in log:
        report.error = "the eval script stopped before the tests finished"
        return
    section = log.split(start, 1)[1].rsplit(end, 1)[0]
    exit_line = section.rsplit(marker + "Test Exit Code: ", 1)
    report.test_exit_code = int(exit_line[1].split()[0]) if len(exit_line) == 2 else None
    spec = spec_for(task)
    statuses = spec.parse(exit_line[0]) or spec.parse(log)  # the harness also reads the whole log
    report.error = invalid_log_reason(statuses, report.test_exit_code)
    if report.error:
        return  # status stays "error": no verdict on a log the harness would reject
    tests = Verdict.from_statuses(statuses, task.fail_to_pass, task.pass_to_pass)
    report.fail_to_pass, report.pass_to_pass = tests.fail_to_pass, tests.pass_to_pass
    report.status = "resolved" if tests.resolution() == RESOLVED_FULL else "unresolved"
