"""Host-side grading, as SWE-bench resolves an instance, in a fresh container from the task image.

1. A new container starts from the pristine task image: the agent's container, and anything it
   left running or wrote there (a conftest.py, a reward file, a fake `git`), plays no part. Its
   tools come from the image, and no code of the repository has run in it yet.
2. The agent's changes reach it without any program of the agent's container: the files the engine
   says changed are copied over (`grade_sandbox`), or a diff (`grade`) is applied by the image's git
   with hooks disabled (GNU `patch` as a fallback). Then what actually changed on disk, as the
   engine sees it, is checked: a write under `.git/` or outside the repository refuses the patch,
   and protected files (tests, conftest.py, pytest configuration...) go back to `base_commit`.
3. The files `test_patch` touches are reset to `base_commit`, `test_patch` is applied, and the tests
   run as an unprivileged user, framed by markers that carry a nonce only root can read. Every
   process the tests left behind is killed before the end marker is written.
4. The log is parsed on the host. For pytest, every passing verdict in the log is checked against
   a report a plugin wrote, test by test, to a root-only file: printed output cannot forge a pass.
   The log is then judged as the SWE-bench harness judges it (`report`): the task is resolved only
   if every FAIL_TO_PASS test passes and no PASS_TO_PASS test fails or goes missing; a log the
   harness would reject is an error, not a failing agent.
5. Against the code under test, which runs inside pytest: the plugin's records are signed (a key
   only the plugin reads), it checks that pytest's machinery, the registered plugins and itself
   stay as they were (a change makes the grading "tampered", reward 0), and a static screen of the
   agent's changes (`screen`) zeroes or flags code that targets the test run. What is and is not
   defended is written in docs/swe-security.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import io
import json
import secrets
import shlex
import tarfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gymenvs.container.background import in_thread
from gymenvs.container.family import GradingAhead
from gymenvs.container.output import decode_output
from gymenvs.container.runtime import Limits, Runtime, Sandbox, SandboxError
from gymenvs.container.shell import ShellSandbox
from gymenvs.swe.grading.changes import (
    MAX_CHANGED_BYTES,
    STAGING,
    TRUSTED_GIT,
    copy_changes,
    disk_changes,
    enforce_policy,
    read_files,
)
from gymenvs.swe.grading.logparsers import FAILED
from gymenvs.swe.grading.patches import filter_diff
from gymenvs.swe.grading.report import PASSING, RESOLVED_FULL, Verdict, invalid_log_reason
from gymenvs.swe.grading.screen import Finding, ScreenMode, screen_changes, screened_paths
from gymenvs.swe.grading.screen import summary as screen_summary
from gymenvs.swe.grading.specs import spec_for
from gymenvs.swe.images import ENV_SETUP, WORKDIR
from gymenvs.swe.tasks.tasks import Task

_LOG_LIMIT = 8 << 20
#: The report plugin's file, and how much of it is read: all of it, however long the run.
_RESULTS = f"{STAGING}/results.jsonl"
_CHANNEL_LIMIT = 1 << 40
_DIFF_LIMIT = 16 << 20
#: Who runs the tests: "uid:gid" of an unprivileged user (nobody), or None for root (as SWE-bench does).
TEST_USER = "65534:65534"
#: Environment of the tests: no pytest plugin loads by itself (an installed package's entry point,
#: an .egg-info the agent wrote); only grading's own report plugin. A test command that needs a
#: plugin loads it by name (`pytest -p xdist ...`).
TEST_ENVIRONMENT = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "GYMENVS_RESULTS_FD": "7", "GYMENVS_RESULTS_KEY_FD": "8"}
_PLUGIN_DIR = "/run/gymenvs-python"
_PLUGIN_SOURCE = Path(__file__).parent / "results_plugin.py"
_SCREEN_FILE_LIMIT = 200
#: Statuses that are a verdict on the agent's changes; the others ("timeout", "error") are not.
BROKEN_TASK = "the task's test_patch does not apply: the task is broken"
MODEL_STATUSES = frozenset({"resolved", "unresolved", "patch_failed", "tampered", "screened"})


#: The statuses whose `outcome_reason` is not the status itself.
_OUTCOME_REASONS = {"resolved": "solved", "unresolved": "failed", "timeout": "grading_timeout", "error": "grading_error"}


@dataclass
class GradeReport:
    """What grading found. `fail_to_pass` / `pass_to_pass` map every listed test to its status.

    `status` is "resolved" or "unresolved" (the agent's result), "patch_failed" (its diff does not
    apply), "tampered" (the code under test changed how pytest runs or reports the tests, or wrote
    to the results channel: `tampering` says what), "screened" (the static screen found code that
    targets the test run, with `screen="zero"`: `screen` says what), "timeout" (the tests ran out of
    time) or "error" (infrastructure or a broken task).
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
    #: The whole grading's wall time, and the test run's alone (the rest is grading's own cost).
    seconds: float = 0.0
    test_seconds: float = 0.0
    #: The test run's whole output (up to 8 MiB), and its last 4,000 characters.
    log: str = ""
    log_tail: str = ""
    #: What the runtime integrity check and the results channel saw change (status "tampered").
    tampering: list[str] = field(default_factory=list)
    #: The static screen's findings in the agent's changes outside the tests (`screen.Finding` dicts).
    screen: list[dict[str, Any]] = field(default_factory=list)
    #: The `reason` of the sandbox failure that stopped grading ("image_missing", "container_died",
    #: "oom_killed", "disk_limit", "engine_error"...; status "error"), None if none did.
    fault: str | None = None

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0

    @property
    def outcome(self) -> str:
        """Whose result this is: "model" (a verdict on the agent's changes, `tampered` and `screened`
        included), "invalid" (the task's test_patch does not apply) or "infra" (grading timed out or
        could not run)."""
        if self.status in MODEL_STATUSES:
            return "model"
        return "invalid" if self.error == BROKEN_TASK else "infra"

    @property
    def reason(self) -> str:
        """Why, as an episode's `info["outcome_reason"]` says it (`gymenvs.core.outcomes`): "solved",
        "failed", "broken_task", "grading_timeout", the sandbox failure that stopped grading (`fault`:
        "image_missing", "container_died", "oom_killed", "disk_limit", "engine_error"...) or else "grading_error", else the
        status ("patch_failed", "tampered", "screened")."""
        if self.outcome == "invalid":
            return "broken_task"
        if self.status == "error" and self.fault:
            return self.fault  # what stopped grading, as the sandbox said (a missing image, a killed container...)
        return _OUTCOME_REASONS.get(self.status, self.status)

    def tests_status(self) -> dict[str, dict[str, list[str]]]:
        """SWE-bench's report shape: each list split into success and failure."""
        return Verdict(self.fail_to_pass, self.pass_to_pass).tests_status()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "resolved": self.resolved, "outcome": self.outcome, "reason": self.reason,
                "tests_status": self.tests_status()}

    def summary(self) -> str:
        counts = self.tests_status()
        f2p, p2p = counts["FAIL_TO_PASS"], counts["PASS_TO_PASS"]
        text = (f"Grading: {self.status}. FAIL_TO_PASS {len(f2p['success'])}/{len(self.fail_to_pass)} passed, "
                f"PASS_TO_PASS {len(p2p['success'])}/{len(self.pass_to_pass)} passed.")
        if self.ignored_files:
            text += f" Not applied (protected): {', '.join(sorted(self.ignored_files))}."
        return text + (f" {self.error}" if self.error else "")


def grade(runtime: Runtime, task: Task, diff: str, *, image: str, timeout: float = 1800, limits: Limits = Limits(),
          episode_id: str = "", test_user: str | None = TEST_USER, screen: ScreenMode = "zero") -> GradeReport:
    """Grade `diff` (the agent's changes against `task.base_commit`) in a fresh container from `image`.

    Infrastructure failures come back as a report with status "error", never as an exception.
    `screen`: what the static screen's findings do, "zero" (status "screened", reward 0) or "flag"
    (recorded in `report.screen` only).
    """
    kept, ignored = filter_diff(diff, frozenset(task.test_files))
    report = GradeReport(task.instance_id, "error", ignored_files=ignored, patch_is_empty=not kept.strip())
    return _grade(runtime, task, report, lambda box: _apply_diff(box, kept), image=image, timeout=timeout,
                  limits=limits, episode_id=episode_id, test_user=test_user, screen=screen)[0]


@dataclass
class FreshGradingContainer(GradingAhead):
    """A grading container started before the agent is done (`start_grading_container`): grading's directories
    are in it, and `before` holds what its engine lists as changed before any of the agent's work is applied."""

    sandbox: Sandbox
    before: frozenset[str]

    def discard(self) -> None:
        self.sandbox.remove()


def start_grading_container(runtime: Runtime, image: str, *, limits: Limits, episode_id: str) -> FreshGradingContainer:
    """A fresh container of `image` ready for `grade_sandbox(..., ahead=)`: nothing of the agent's reaches it."""
    sandbox = runtime.start(image, role="grading", episode_id=episode_id, limits=limits, workdir=WORKDIR)
    try:
        sandbox.put_archive("/", _staging_archive())
        return FreshGradingContainer(sandbox, frozenset(sandbox.changed_paths("/")))
    except BaseException:
        sandbox.remove()
        raise


def grade_sandbox(runtime: Runtime, task: Task, agent: Sandbox, *, image: str, timeout: float = 1800,
                  limits: Limits = Limits(), episode_id: str = "", test_user: str | None = TEST_USER,
                  screen: ScreenMode = "zero", done_reading: Callable[[], None] = lambda: None,
                  ahead: FreshGradingContainer | None = None) -> tuple[GradeReport, str]:
    """Grade what the agent changed in `agent`'s repository, read from outside it (no program of the
    agent's container runs); return the report and the graded changes as a git diff. `screen` as in `grade`;
    `done_reading` is called once `agent` is no longer read (its changes are in the grading container).
    `ahead`: the grading container, started while the agent worked (else one starts now); removed here."""
    report = GradeReport(task.instance_id, "error")
    # The engine's list of what the agent changed is the slowest read of its container: taken while the
    # grading container starts.
    changed = in_thread(lambda: agent.changed_paths(WORKDIR), "gymenvs-grading-read")

    def apply(box: Sandbox) -> str | None:
        copy_changes(agent, box, WORKDIR, changed=changed.result())
        done_reading()
        return None

    return _grade(runtime, task, report, apply, image=image, timeout=timeout, limits=limits, episode_id=episode_id,
                  test_user=test_user, take_diff=True, screen=screen, ahead=ahead)


def extract_diff(sandbox: Sandbox, base_commit: str, timeout: float = 300) -> str:
    """What the agent changed in `sandbox`'s repository since `base_commit`, as a git diff taken by a
    trusted git: the changed files, read from outside it, are copied into a fresh container from the
    same image (`grade_sandbox` does this in the grading container and saves a container start)."""
    fresh = sandbox.runtime.start(sandbox.image, role="diff", episode_id="extract-diff", workdir=WORKDIR,
                                  limits=dataclasses.replace(sandbox.limits, network=False))
    try:
        fresh.put_archive("/", _staging_archive())
        copy_changes(sandbox, fresh, WORKDIR)
        return _staged_diff(fresh, base_commit, timeout)
    finally:
        fresh.remove()


def _grade(runtime: Runtime, task: Task, report: GradeReport, apply: Callable[[Sandbox], str | None], *, image: str,
           timeout: float, limits: Limits, episode_id: str, test_user: str | None,
           take_diff: bool = False, screen: ScreenMode = "zero",
           ahead: FreshGradingContainer | None = None) -> tuple[GradeReport, str]:
    started = time.monotonic()
    nonce, key = uuid.uuid4().hex, secrets.token_bytes(32)
    diff: str | None = ""
    result, channel = None, Channel()
    try:
        if ahead is None:
            ahead = start_grading_container(runtime, image, limits=limits, episode_id=episode_id or task.instance_id)
        sandbox = ahead.sandbox
        try:
            diff = _prepare_through_shell(sandbox, ahead.before, task, report, apply, take_diff, nonce, key, test_user)
            if diff is not None:
                tests_started = time.monotonic()
                result = sandbox.run(f"bash {STAGING}/run-tests.sh", timeout=timeout, output_limit=_LOG_LIMIT)
                report.test_seconds = time.monotonic() - tests_started
                if not result.timed_out:
                    _ensure_survived(sandbox, finished=f">>>>> {nonce} End Test Output" in result.output.text())
                channel = read_channel(_fetch_channel(sandbox), key)
        finally:
            sandbox.remove()
    except SandboxError as exc:
        report.error, report.fault, result = f"grading could not run: {exc}", exc.reason, None
    if result is not None:
        log = decode_output(result.output.raw())
        _read_log(report, task, log, nonce, timed_out=result.timed_out, timeout=timeout, channel=channel)
    if report.screen and screen == "zero" and report.status in ("resolved", "unresolved"):
        # The tests still ran: the report shows what they said, and the status why it does not count.
        report.status = "screened"
        report.error = "the static screen found: " + screen_summary(Finding(**finding) for finding in report.screen)
    report.seconds = time.monotonic() - started
    return report, diff or ""


def _ensure_survived(sandbox: Sandbox, *, finished: bool) -> None:
    """`ContainerGone` if the grading container died under the tests (killed from outside, out of memory).
    The engine may mark it dead a moment after the tests' output ends, so a run that did not reach its
    end marker is watched for up to 2 s."""
    deadline = time.monotonic() + (0.0 if finished else 2.0)
    while True:
        sandbox.ensure_running()
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _prepare_through_shell(sandbox: Sandbox, before: frozenset[str], task: Task, report: GradeReport,
                           apply: Callable[[Sandbox], str | None], take_diff: bool, nonce: str, key: bytes,
                           test_user: str | None) -> str | None:
    """`_prepare`, then the test run's script and report plugin put in place, all through one shell in the
    grading container (closed before the tests run): the agent's diff, or None when the tests cannot run."""
    shell = ShellSandbox(sandbox)
    try:
        diff = _prepare(shell, before, task, report, apply, take_diff)
        if diff is not None:
            shell.put_files(_PLUGIN_DIR, {f"{plugin_module(nonce)}.py": _PLUGIN_SOURCE.read_bytes()})
            shell.put_files(STAGING, {"run-tests.sh": eval_script(task, nonce, test_user).encode(),
                                      "results.jsonl": b"", "results.key": key}, mode=0o600)
        return diff
    finally:
        shell.close()


def _prepare(sandbox: Sandbox, before: frozenset[str], task: Task, report: GradeReport,
             apply: Callable[[Sandbox], str | None], take_diff: bool) -> str | None:
    """Apply the agent's changes and the test patch, checking what changed on disk since `before`; the agent's
    diff (if `take_diff`, else ""), or None when the tests cannot run (`report` then says why)."""
    failure = apply(sandbox)
    changes = disk_changes(sandbox, WORKDIR, before)
    if changes.refused and not failure:
        failure = "the patch writes " + ", ".join(f"{path} ({why})" for path, why in sorted(changes.refused.items())[:5])
    if failure:
        report.status, report.error = "patch_failed", failure
        return None
    diff = _staged_diff(sandbox, task.base_commit) if take_diff else ""
    if take_diff:
        report.patch_is_empty = not diff.strip()
    report.screen = [finding.to_dict() for finding in _screen(sandbox, task, changes.changed)]
    report.ignored_files.update(enforce_policy(sandbox, WORKDIR, task.base_commit, changes.changed, frozenset(task.test_files)))
    if not _apply_test_patch(sandbox, task):
        report.error = BROKEN_TASK
        return None
    return diff


def _staging_archive() -> bytes:
    """Grading's own directories: a root-only one (scripts, nonce, results) and the report plugin's."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, mode in ((STAGING, 0o700), (_PLUGIN_DIR, 0o755)):
            info = tarfile.TarInfo(name.lstrip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, int(time.time())
            tar.addfile(info)
    return archive.getvalue()


def plugin_module(nonce: str) -> str:
    """The report plugin's module name in one grading run: derived from the nonce (which it does not
    reveal), so no module of the repository can be written in advance to stand in for it."""
    return "gymenvs_results_" + hashlib.sha256(nonce.encode()).hexdigest()[:16]


def _apply_diff(sandbox: Sandbox, diff: str) -> str | None:
    """Apply `diff` with the image's git (hooks off), else GNU patch; None, or why it does not apply."""
    if not diff.strip():
        return None
    sandbox.put_files(STAGING, {"agent.diff": diff.encode("utf-8", "surrogateescape")}, mode=0o600)
    patch = f"{STAGING}/agent.diff"
    result = sandbox.run(f"{ENV_SETUP}\n{TRUSTED_GIT} apply --verbose {patch} || patch --batch --fuzz=5 -p1 -i {patch}",
                         timeout=300)
    if result.exit_code != 0:
        return "the agent's diff does not apply to the task's base commit"
    return None


def _staged_diff(sandbox: Sandbox, base_commit: str, timeout: float = 300) -> str:
    """The repository's changes against `base_commit`, new files included, taken by the image's git."""
    command = (f"{ENV_SETUP}\n{TRUSTED_GIT} add -A && "
               f"{TRUSTED_GIT} diff --cached --binary --no-color --no-ext-diff --no-textconv {shlex.quote(base_commit)}")
    result = sandbox.run(command, timeout=timeout, output_limit=_DIFF_LIMIT)
    if result.timed_out or result.exit_code != 0 or result.output.elided:
        raise SandboxError(f"could not take the agent's diff (exit {result.exit_code}): {result.output.text()[-500:]}")
    return result.output.raw().decode("utf-8", "surrogateescape")


def _apply_test_patch(sandbox: Sandbox, task: Task) -> bool:
    """Reset the files `test_patch` touches to `base_commit` and apply it; False if it does not apply."""
    base = shlex.quote(task.base_commit)
    sandbox.put_files(STAGING, {"test.diff": task.test_patch.encode("utf-8", "surrogateescape")}, mode=0o600)
    script = f"""{ENV_SETUP}
for file in {" ".join(map(shlex.quote, task.test_files))}; do
  if {TRUSTED_GIT} cat-file -e {base}:"$file" 2>/dev/null
  then {TRUSTED_GIT} checkout -q {base} -- "$file"
  else rm -rf -- "$file"
  fi
done
{TRUSTED_GIT} apply --verbose {STAGING}/test.diff"""
    return sandbox.run(script, timeout=300).exit_code == 0


def _fetch_channel(sandbox: Sandbox) -> bytes:
    """The report plugin's records, read from the root-only file by the engine, or from the container's layer."""
    fetched = read_files(sandbox, [_RESULTS], _CHANNEL_LIMIT).get(_RESULTS)
    return fetched[1] if fetched and fetched[0].isfile() else b""


@dataclass
class Channel:
    """What the report plugin wrote: its verified records, and what in the file it did not write."""

    records: list[dict[str, Any]] = field(default_factory=list)
    #: Lines that are not the plugin's (unsigned, out of sequence, not JSON), and its tampered records.
    tampering: list[str] = field(default_factory=list)


def read_channel(raw: bytes, key: bytes) -> Channel:
    """The records of the results file whose HMAC under `key` verifies, in sequence; anything else, and
    every change the plugin's integrity check reported, goes to `tampering`."""
    channel, expected, foreign = Channel(), 1, 0
    for line in raw.splitlines():
        try:
            envelope = json.loads(line)
            body, mac = envelope["body"], envelope["mac"]
            signed = hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest())
            record = json.loads(body) if signed else None
        except (ValueError, KeyError, TypeError, AttributeError):
            record = None
        if not isinstance(record, dict):
            foreign += 1
            continue
        sequence = record.pop("seq", None)
        if sequence == 1 and record.get("event") == "start":
            expected = 1  # each pytest of the command counts from 1
        if sequence != expected:
            channel.tampering.append(f"the results channel skips from record {expected} to {sequence}")
        expected = (sequence if isinstance(sequence, int) else expected) + 1
        if record.get("event") == "tampered":
            channel.tampering += [f"{change} (seen {record.get('when')})" for change in record.get("changes", [])]
        channel.records.append(record)
    if foreign:
        channel.tampering.insert(0, f"the results channel holds {foreign} line(s) the report plugin did not write")
    return channel


def _screen(sandbox: Sandbox, task: Task, changed: dict[str, str]) -> list[Any]:
    """The static screen over the changed files outside the tests, read from the grading container,
    each compared with its content at `base_commit`."""
    paths = screened_paths(changed, frozenset(task.test_files))[:_SCREEN_FILE_LIMIT]
    fetched = read_files(sandbox, [f"{WORKDIR}/{path}" for path in paths], MAX_CHANGED_BYTES)
    new = {path: found[1] for path in paths if (found := fetched.get(f"{WORKDIR}/{path}")) and found[0].isfile()}
    return screen_changes(new, _base_contents(sandbox, task.base_commit, [p for p in new if "\n" not in p]))


def _base_contents(sandbox: Sandbox, base_commit: str, paths: list[str]) -> dict[str, bytes | None]:
    """Each path's content at `base_commit` (None where it did not exist), by one `git cat-file --batch`."""
    if not paths:
        return {}
    batch = "".join(f"{base_commit}:{path}\n" for path in paths).encode("utf-8", "surrogateescape")
    sandbox.put_files(STAGING, {"screen-paths": batch}, mode=0o600)
    result = sandbox.run(f"{ENV_SETUP}\n{TRUSTED_GIT} cat-file --batch < {STAGING}/screen-paths", timeout=300,
                         output_limit=_DIFF_LIMIT)
    data, at = result.output.raw(), 0
    contents: dict[str, bytes | None] = {}
    for path in paths:
        end = data.find(b"\n", at)
        if end < 0:
            break
        header = data[at:end].split()
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            contents[path] = data[end + 1 : end + 1 + size]
            at = end + 1 + size + 1
        else:
            contents[path] = None
            at = end + 1
    return contents


def eval_script(task: Task, nonce: str, test_user: str | None = TEST_USER) -> str:
    """The root-only bash script that runs the tests: as `test_user` (the repository's directories
    handed to it, so it can create files), framed by nonce markers; it kills whatever the tests left
    running before it writes the exit code and the end marker."""
    command = spec_for(task).command
    environment = " ".join(f"{key}={value}" for key, value in TEST_ENVIRONMENT.items())
    environment += f" PYTEST_PLUGINS={plugin_module(nonce)}"
    environment += f' PYTHONPATH={_PLUGIN_DIR}"${{PYTHONPATH:+:$PYTHONPATH}}"'
    if test_user is None:
        as_user, prepare, kill_leftovers = "", "", ""
    else:
        uid, gid = test_user.split(":")
        as_user = f"setpriv --reuid={uid} --regid={gid} --clear-groups --inh-caps=-all"
        prepare = f"""find . -path ./.git -prune -o -type d -exec chown {test_user} {{}} +
mkdir -p /tmp/gymenvs-home && chown {test_user} /tmp/gymenvs-home && export HOME=/tmp/gymenvs-home"""
        kill_leftovers = f"{as_user} bash -c 'for ((i = 0; i < 50; i++)); do kill -9 -1 2>/dev/null || break; done'"
    return f"""#!/bin/bash
set -uo pipefail
{ENV_SETUP}
cd {WORKDIR}
mark() {{ echo ">>>>> {nonce} $*"; }}
{prepare}
exec 7>>{STAGING}/results.jsonl 8<{STAGING}/results.key
mark "Start Test Output"
{as_user} env {environment} bash -c {shlex.quote(command)}
code=$?
{kill_leftovers}
exec 7>&- 8<&-
mark "Test Exit Code: $code"
mark "End Test Output"
"""


def _read_log(report: GradeReport, task: Task, log: str, nonce: str, *, timed_out: bool, timeout: float,
              channel: Channel | None = None) -> None:
    marker = f">>>>> {nonce} "
    report.log, report.log_tail = log, log[-4000:]
    channel = channel or Channel()
    if timed_out:
        report.status, report.error = "timeout", f"the tests did not finish in {timeout:g} s"
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
    statuses, forged = check_against_runner(statuses, channel.records)
    report.tampering = channel.tampering + _exit_tampering(channel.records, report.test_exit_code)
    if report.tampering:
        report.status = "tampered"
        report.error = "the test run was tampered with: " + "; ".join(report.tampering[:5])
        return
    if forged is None:
        report.error = "the tests' report was cut short (the run was killed): no verdict"
        return
    report.error = invalid_log_reason(statuses, report.test_exit_code)
    if report.error:
        return  # status stays "error": no verdict on a log the harness would reject
    tests = Verdict.from_statuses(statuses, task.fail_to_pass, task.pass_to_pass)
    report.fail_to_pass, report.pass_to_pass = tests.fail_to_pass, tests.pass_to_pass
    report.status = "resolved" if tests.resolution() == RESOLVED_FULL else "unresolved"
    if forged:
        report.error = (f"the log claims {len(forged)} test(s) passed that the test runner saw fail or never ran "
                        f"(counted as failed): {', '.join(forged[:5])}")


def _exit_tampering(records: Sequence[dict[str, Any]], exit_code: int | None) -> list[str]:
    """What the exit of a pytest run says against it: a session that started and never finished
    though no signal killed it (an exit from inside the run, or the plugin removed), or an exit
    code of 0 after pytest itself ended with failures."""
    events = [r for r in records if r.get("event") in ("start", "finish")]
    if not events or exit_code is None:
        return []
    starts = sum(r["event"] == "start" for r in events)
    finishes = [r for r in events if r["event"] == "finish"]
    if starts != len(finishes) and exit_code < 128:
        return [f"pytest's session started but never finished, and the command exited {exit_code} (no signal)"]
    if finishes and finishes[-1].get("exitstatus") not in (0, None) and exit_code == 0:
        return [f"pytest ended with exit status {finishes[-1]['exitstatus']} but the command exited 0"]
    return []


def check_against_runner(statuses: dict[str, str], runner: Sequence[dict[str, Any]]) -> tuple[dict[str, str], list[str] | None]:
    """The log's statuses with every pass the runner's report contradicts turned into FAILED, and those
    tests; None instead of the list if the report started but never finished. Without a report (not
    pytest, or its environment filtered out the plugin) the log stands alone."""
    sessions = [r.get("event") for r in runner if "event" in r]
    if not sessions:
        return statuses, []
    if sessions.count("start") != sessions.count("finish") or "garbled" in sessions:
        return statuses, None
    failed, passed = set(), set()
    for record in runner:
        if "nodeid" not in record:
            continue
        nodeid, outcome = record["nodeid"], record["outcome"]
        if outcome == "failed":  # in any phase; a strict xfail that passed is reported failed too
            failed.add(nodeid)
        elif (outcome == "passed" and record["when"] == "call") or (outcome == "skipped" and record["xfail"]):
            passed.add(nodeid)
    seen = failed | passed | {r["nodeid"] for r in runner if "nodeid" in r}
    stems = {nodeid.split("[", 1)[0] for nodeid in seen}
    forged = []
    for name, status in statuses.items():
        if status not in PASSING or name in passed - failed:
            continue
        if name in seen or name.split("[", 1)[0] not in stems:  # a parser may rewrite parameters: match on the stem
            forged.append(name)
    return {**statuses, **dict.fromkeys(forged, FAILED)}, forged
