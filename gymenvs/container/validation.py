"""Task validation, for every family: the verdict on one task (`TaskValidation`), and the machinery every
family's validation shares: a report (JSONL, one line per task) that a rerun resumes, workers, a
progress bar (`run_validation`), and the reading of a report (`read_report`, `invalid_tasks`).

Each family judges its own tasks (`TaskFamily.validate`): SWE-bench rows by their gold and empty patches
(`gymenvs.swe.grading.validate`), Harbor tasks by their oracle and an empty run (`gymenvs.terminal.validate`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

VALID, INVALID, ERROR = "valid", "invalid", "error"
#: How much of a run's test output a verdict keeps: its last lines.
OUTPUT_LINES = 20

T = TypeVar("T")
#: A line of test output that says what went wrong, rather than a banner or a count.
_TROUBLE = re.compile(r"error|fail|refused|denied|not found|no such|timed out|cannot|can't|unable", re.IGNORECASE)
#: pytest's banners and its closing count (`==== 1 failed in 0.2s ====`), which name no cause.
_BANNER = re.compile(r"^[=_-]+( .* [=_-]+)?$")


@dataclass(frozen=True)
class RunEvidence:
    """What one graded run of a validation showed: which run (`oracle`, `gold` or `empty`), the test command and
    its exit code, the reward and the grader's reason for it, and the last lines of the test output."""

    run: str
    command: str
    exit_code: int | None
    reward: float | None
    reason: str
    output: str = ""

    @classmethod
    def of(cls, run: str, command: str, exit_code: int | None, reward: float | None, reason: str,
           log: str) -> RunEvidence:
        return cls(run, command, exit_code, reward, reason, "\n".join(log.rstrip().splitlines()[-OUTPUT_LINES:]))

    def cause(self) -> str:
        """One line: how the test command ended and the output line that says why, e.g.
        `test.sh exited 1: curl: (7) Failed to connect to 127.0.0.1 port 8080`."""
        ended = f"{self.command} exited {self.exit_code}" if self.exit_code is not None else f"{self.command} gave no exit code"
        scored = "no reward" if self.reward is None else f"reward {self.reward:g}"
        line = telling_line(self.output)
        return f"{ended} ({scored}, {self.reason})" + (f": {line}" if line else "")


def telling_line(output: str) -> str:
    """The last line of `output` that names a problem (an error, a failure, a refused connection), else its last
    line that is not a banner; "" for no output."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not _BANNER.match(line.strip())]
    return next((line for line in reversed(lines) if _TROUBLE.search(line)), lines[-1] if lines else "")[:200]



@dataclass(frozen=True)
class BrokenRule:
    """One rule a task broke, the tests that broke it, and what was seen."""

    rule: str
    tests: tuple[str, ...] = ()
    detail: str = ""


@dataclass
class TaskValidation:
    """The verdict on one task: `valid`, `invalid` (with the rules it broke) or `error` (no verdict)."""

    instance_id: str
    status: str
    broken: list[BrokenRule] = field(default_factory=list)
    runs: int = 1
    #: The status of each graded run: "resolved", "unresolved", "patch_failed", "timeout" or "error".
    empty_runs: list[str] = field(default_factory=list)
    gold_runs: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    #: `fingerprint(task)` of the task as validated: a rerun validates a task again if its row changed.
    fingerprint: str = ""
    #: Each graded run of a verdict that is not `valid`, in the order run: why the rules broke.
    evidence: list[RunEvidence] = field(default_factory=list)
    #: Read back from the report of an earlier run, not validated now (not written to the report).
    resumed: bool = field(default=False, compare=False)

    @property
    def rule(self) -> str | None:
        """The first rule broken (`RULES` order), or None."""
        return self.broken[0].rule if self.broken else None

    @property
    def judged(self) -> bool:
        return self.status in (VALID, INVALID)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["resumed"]
        data["broken"] = [{**asdict(b), "tests": list(b.tests)} for b in self.broken]
        return {"instance_id": self.instance_id, "status": self.status, "rule": self.rule, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskValidation:
        broken = [BrokenRule(b["rule"], tuple(b.get("tests", ())), b.get("detail", "")) for b in data.get("broken", ())]
        return cls(data["instance_id"], data["status"], broken, int(data.get("runs", 1)), list(data.get("empty_runs", ())),
                   list(data.get("gold_runs", ())), data.get("error"), float(data.get("seconds", 0.0)),
                   str(data.get("fingerprint", "")), [RunEvidence(**run) for run in data.get("evidence", ())])

    def summary(self) -> str:
        if self.status == VALID:
            return VALID
        if self.status == ERROR:
            return f"{ERROR}: {self.error}"
        parts = [b.rule + (f" ({', '.join(b.tests[:3])}{', ...' if len(b.tests) > 3 else ''})" if b.tests else "")
                 for b in self.broken]
        first = self.broken[0].detail.splitlines()[0][:300] if self.broken and self.broken[0].detail else ""
        return f"{INVALID}: " + "; ".join([parts[0] + (f": {first}" if first else ""), *parts[1:]])


def read_report(path: str | Path) -> dict[str, TaskValidation]:
    """The verdicts of a validation report (JSONL; for a task listed twice, the last line wins).
    A missing file is an empty report; a line cut short by a killed run is ignored."""
    path = Path(path)
    if not path.exists():
        return {}
    verdicts = {}
    for line in path.read_text().splitlines():
        try:
            verdict = TaskValidation.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError):
            continue
        verdicts[verdict.instance_id] = verdict
    return verdicts


def invalid_tasks(path: str | Path) -> dict[str, str]:
    """{instance_id: why} of every task the report at `path` marks invalid; `ValueError` if it does not exist."""
    if not Path(path).is_file():
        raise ValueError(f"validation report {str(path)!r} does not exist: write one with `gymenvs tasks validate`")
    return {i: v.summary() for i, v in read_report(path).items() if v.status == INVALID}


def run_validation(tasks: Sequence[T], validate_one: Callable[[T, int], TaskValidation], *, key: Callable[[T], str],
                   fingerprint_of: Callable[[T], str], report: str | Path, runs: int = 1, workers: int = 1,
                   progress: bool = True) -> list[TaskValidation]:
    """The machinery every task format shares: `validate_one(task, runs)` on each task `report` has not
    judged yet (by `key`, with at least `runs` runs, on the task as `fingerprint_of` sees it now),
    `workers` at a time, behind a progress bar; each verdict appended to `report` as it comes, the
    report rewritten whole at the end. The verdicts, in task order."""
    from tqdm import tqdm

    if runs < 1 or workers < 1:
        raise ValueError(f"runs={runs}, workers={workers}: each must be 1 or more")
    report = Path(report)
    earlier = read_report(report)
    done = {key(t): earlier[key(t)] for t in tasks
            if key(t) in earlier and _still_holds(earlier[key(t)], fingerprint_of(t), runs)}
    todo = [task for task in tasks if key(task) not in done]
    verdicts = {i: dataclasses.replace(v, resumed=True) for i, v in done.items()}
    report.parent.mkdir(parents=True, exist_ok=True)
    with (report.open("a") as out, tqdm(total=len(tasks), initial=len(verdicts), desc="validating", unit="task",
                                        disable=not progress) as bar, ThreadPoolExecutor(workers) as pool):
        futures = [pool.submit(validate_one, task, runs) for task in todo]
        for future in as_completed(futures):
            verdict = future.result()
            out.write(json.dumps(verdict.to_dict()) + "\n")
            out.flush()
            verdicts[verdict.instance_id] = verdict
            bar.set_postfix(invalid=sum(v.status == INVALID for v in verdicts.values()), refresh=False)
            bar.update()
    ordered = [verdicts[key(task)] for task in tasks]
    _rewrite(report, ordered)
    return ordered


def _still_holds(verdict: TaskValidation, task_fingerprint: str, runs: int) -> bool:
    """Whether a verdict of an earlier run stands: reached, with enough runs, on the task as it is now."""
    return verdict.judged and verdict.runs >= runs and verdict.fingerprint == task_fingerprint


def _rewrite(report: Path, verdicts: Sequence[TaskValidation]) -> None:
    """Rewrite the report with one line per task, whole or not at all; the verdicts it holds on other
    tasks (from a run over another selection of the dataset) are kept, first."""
    ours = {v.instance_id for v in verdicts}
    others = [v for i, v in read_report(report).items() if i not in ours]
    lines = [json.dumps(v.to_dict()) for v in (*others, *verdicts)]
    partial = report.with_name(report.name + ".partial")
    partial.write_text("".join(line + "\n" for line in lines))
    partial.replace(report)
