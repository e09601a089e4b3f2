"""Grading a Harbor task where the agent cannot reach: its `tests/test.sh` runs on the agent's files in another
container (the verifier, `gymenvs.terminal.verifier`), and the reward is read by the runtime, not by the tests.

`grade_task(sandbox, task)`, when the episode ends, through the sandbox's runtime only:

0. records the services the agent left running (the processes that listen on a TCP port:
   `gymenvs.terminal.services`; where the runtime reads from outside that nothing listens, nothing runs);
1. stops the agent's container (SIGKILL to its init: the kernel kills every process in it, daemons
   included; no program of the container takes part), and lists what the agent changed in its files
   (`Sandbox.changed_paths`);
2. puts those files in the verifier, one of two ways:
   - **copied** into a verifier of the task's image started while the agent worked (`ahead`, the family's
     `grade_ahead`), where the runtime hands the changes over from the agent's layer (`Sandbox.changes_archive`):
     what the agent deleted is deleted there, what it added or changed is written there, but for /logs,
     /logs/verifier and /tests, which the verifier has afresh;
   - else (services to start again, a snapshot to keep, a runtime that cannot, a later step of a task) from a
     **snapshot**: whatever the agent left at /logs, /logs/verifier and /tests (a symbolic link, a file) is made a
     plain directory in its stopped container if it changed anything there, the container is committed
     (`Sandbox.commit`), and a fresh verifier starts from that snapshot;
   either way the verifier has the task's cpus, memory and storage, no network unless the task allows it, two
   fresh volumes over /logs/verifier and /tests with the task's `tests/` in /tests, and the image's tools on
   PATH put back (`toolguard`), all through the runtime's file operations;
3. if the agent's changed files are kept (`gymenvs.terminal.changes`), reads them from the verifier before anything
   runs in it; starts the recorded services again from the snapshot in a second container that shares only the
   verifier's network namespace, and runs `bash /tests/test.sh` with the verifier's time limit ([verifier]
   timeout_sec, or `timeout_s`) and environment;
4. kills every other process of the verifier the moment test.sh exits, then stops it (nothing the tests
   started can write afterwards), and reads `/logs/verifier/reward.txt` (one float) or `reward.json` (named
   scores), size-capped, never following a symbolic link: from the volume's directory on this host where the
   runtime gives one (`Runtime.volume_directory`), else through the engine.

What this guarantees, and what grading a container's state cannot, is in docs/terminal-security.md."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import os
import shlex
import stat
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from gymenvs.container.agent.specs import AGENTS_ROOT, MOUNT
from gymenvs.container.output import decode_output
from gymenvs.container.runtime import PathStat, Sandbox, SandboxError
from gymenvs.container.runtime.base import ChangeKind
from gymenvs.container.runtime.commands import entries_archive, kill_all_script
from gymenvs.core.outcomes import EndedBy, ending
from gymenvs.terminal.changes import KeptChanges, keep_changes
from gymenvs.terminal.services import Recording, ServiceReplay, record_services
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.toolguard import restore_tools
from gymenvs.terminal.verifier import ROLE, TESTS_DIR, VERIFIER_DIR, Verifier

LOGS_DIR = "/logs"
REWARD_TXT = "reward.txt"
REWARD_JSON = "reward.json"
#: Bytes a reward file may hold: more is not a reward test.sh wrote (`bad_reward`, 0).
REWARD_TXT_LIMIT = 4096
REWARD_JSON_LIMIT = 64 << 10
_LOG_LIMIT = 1 << 20
_SNAPSHOT_REPOSITORY = "gymenvs-terminal-snapshot"
#: Where kept snapshots go, and their role label (no reaper removes them; `docker image prune -a --filter
#: label=gymenvs.container.role=episode` does).
KEPT_REPOSITORY = "gymenvs-terminal-episode"
KEPT_ROLE = "episode"
_TEST_STATUS = '"$code"'  # the shell variable `_command` saves test.sh's exit status in
#: The line grading prints after test.sh's output, with its exit status.
_EXIT_LINE = "tests/test.sh exited {}"
#: Where gymenvs' own processes in an agent's container come from (its channel, the agent CLIs): not services.
_GYMENVS_PATHS = (MOUNT, AGENTS_ROOT)
#: What kept changes leave out: not the agent's work (the kernel's and the engine's file systems, gymenvs' own files)
#: or what grading mounts afresh.
_NOT_KEPT = ("/proc", "/sys", "/dev", *_GYMENVS_PATHS, VERIFIER_DIR, TESTS_DIR)
#: What grading mounts afresh in the verifier, and what holds a mount: the agent's entries there are not copied
#: into it (`_copy_into_ahead`; /logs itself only, not what else the agent put under it).
_GRADING_OWN = (VERIFIER_DIR, TESTS_DIR)
#: Bytes of the agent's changed files copied into a verifier started ahead; past it, the snapshot carries them.
COPY_LIMIT = 256 << 20
#: Bytes of the deleted paths' list, given on the command line that deletes them; past it, the snapshot instead.
_DELETE_LIMIT = 64 << 10


@dataclass
class VerifierResult:
    """What grading found.

    `reward` is None when there is no verdict on the agent (infra, invalid). `outcome` is who the
    result is about (`gymenvs.core.outcomes.EndedBy`: "model", "infra", "invalid") and `reason` a
    stable name: "solved" (reward >= 1), "partial" (0 < reward < 1), "failed", "no_reward" (test.sh
    wrote no reward file: 0), "bad_reward" (a reward file that is not one float or a JSON object of
    numbers, too big, or not a regular file: 0), "grading_timeout", "grading_error" (infra) or
    "broken_task" (invalid: the task's tests are missing).
    """

    reward: float | None
    scores: dict[str, float] = field(default_factory=dict)
    outcome: str = str(EndedBy.MODEL)
    reason: str = "failed"
    detail: str = ""
    #: What `toolguard` put back before the tests ran (the agent's changes to the image's tools).
    restored: list[str] = field(default_factory=list)
    #: The services the agent left running that were started again for the tests, and whether they listened in
    #: time ("" when none was: `gymenvs.terminal.services.ServiceReplay.note`).
    services: str = ""
    #: Those services as recorded (`Recording.to_list`: command line, working directory, environment, user, ports),
    #: for a re-grading to start them again.
    recorded: list[dict[str, Any]] = field(default_factory=list)
    test_exit_code: int | None = None
    #: The graded snapshot, kept as this image for re-grading (`grade_task(keep_snapshot=True)`), else "".
    snapshot: str = ""
    #: The agent's changes to its container's files, kept for re-grading (`grade_task(changes_limit=...)`:
    #: `KeptChanges.to_dict`), else {}.
    changes: dict[str, Any] = field(default_factory=dict)
    #: What test.sh printed (up to 1 MiB, with grading's line after it), whole and its last 4,000 characters.
    log: str = ""
    log_tail: str = ""
    #: The whole grading's wall time, and test.sh's alone (the rest is grading's own cost).
    seconds: float = 0.0
    test_seconds: float = 0.0

    @property
    def ended_by(self) -> EndedBy:
        return EndedBy(self.outcome)

    def ending(self) -> dict[str, str]:
        """The `info` entries of the episode's last step (`outcome`, `outcome_reason`, `outcome_detail`)."""
        return ending(self.outcome, self.reason, self.detail)

    @property
    def test_output(self) -> str:
        """The tail of what test.sh printed, without the line grading adds after it."""
        return self.log_tail.rstrip().removesuffix(_EXIT_LINE.format(self.test_exit_code))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def grade_task(sandbox: Sandbox, task: TerminalTask, *, timeout_s: float | None = None, restore: bool = True,
               keep_snapshot: bool = False, changes_limit: int | None = None,
               services: Recording | None = None, ahead: Verifier | None = None) -> VerifierResult:
    """Grade what the agent left in `sandbox` (the episode's container, which this stops) by the task's
    tests. `timeout_s` overrides [verifier] timeout_sec; `restore=False` skips putting back the image's
    tools (for a task whose goal is to change them); for `gymenvs tasks regrade`, `keep_snapshot` keeps the graded
    snapshot as the image `VerifierResult.snapshot` names, and `changes_limit` keeps the agent's changed files in
    `VerifierResult.changes` if compressed they take at most that many bytes; `services`, the services to start again
    for the tests instead of those listening in `sandbox` (a re-grading's, recorded by the episode's grading in
    `VerifierResult.recorded`). `ahead`, a verifier of the task's image started while the agent worked
    (`verifier.VerifierAhead`): the agent's changes are copied into it instead of a snapshot started afresh, where
    the runtime hands them over; grading owns it (and removes it) from then on. Engine failures come back as an
    infra result."""
    started = time.monotonic()
    if not task.test_script.is_file():
        return VerifierResult(None, outcome=EndedBy.INVALID, reason="broken_task", detail=f"{task.test_script} is missing")
    timeout = timeout_s if timeout_s is not None else task.config.verifier.timeout_sec
    run = _GradingRun(sandbox, task, uuid.uuid4().hex[:12], keep_snapshot=keep_snapshot, changes_limit=changes_limit,
                      ahead=ahead)
    try:
        result = run.grade(timeout, restore, services)
    except SandboxError as exc:
        result = VerifierResult(None, outcome=EndedBy.INFRA, reason="grading_error", detail=f"grading could not run: {exc}")
    finally:
        run.clean_up()
    result.seconds = time.monotonic() - started
    return result


class _GradingRun:
    """One grading: the snapshot image and the verifier it made (or took ready: `ahead`), removed by `clean_up`."""

    def __init__(self, sandbox: Sandbox, task: TerminalTask, nonce: str, *, keep_snapshot: bool = False,
                 changes_limit: int | None = None, ahead: Verifier | None = None):
        self.sandbox, self.task, self.nonce = sandbox, task, nonce
        self.runtime = sandbox.runtime
        self.keep_snapshot = keep_snapshot
        self.changes_limit = changes_limit
        self.changed: dict[str, ChangeKind] = {}
        self.snapshot: str | None = None
        self.ahead = ahead
        self.verifier: Verifier | None = None
        self.replay: ServiceReplay | None = None

    def grade(self, timeout: float, restore: bool, services: Recording | None = None) -> VerifierResult:
        if services is None:
            services = record_services(self.sandbox, ignore=_GYMENVS_PATHS)
        self.sandbox.stop()
        self.changed = self.sandbox.changed_paths("/")  # the agent's: grading's own below change no tool
        restored = self._copy_into_ahead(restore, services) if self.ahead is not None else None
        if restored is None:
            restored = self._freeze(restore)
            assert self.snapshot is not None
            self.verifier = Verifier.start(self.runtime, self.snapshot, self.task, limits=self.sandbox.limits,
                                           workdir=self.sandbox.workdir, nonce=self.nonce)
        assert self.verifier is not None and self.verifier.sandbox is not None
        grader = self.verifier.sandbox
        changes = self._keep_changes(grader)
        self._replay(services)
        tests_started = time.monotonic()
        result = grader.run(self._command(), timeout=timeout, output_limit=_LOG_LIMIT, kill_after=5)
        test_seconds = time.monotonic() - tests_started
        replayed = self._end_replay()
        grader.stop()  # before reading: nothing the tests left running writes the reward now
        log = decode_output(result.output.raw())
        if result.timed_out:
            verdict = VerifierResult(None, outcome=EndedBy.INFRA, reason="grading_timeout",
                                     detail=f"tests/test.sh did not finish in {timeout:g} s")
        else:
            verdict = read_reward(grader, on_host=self.verifier.logs_directory)
        verdict.restored, verdict.services, verdict.recorded = restored, replayed, services.to_list()
        verdict.snapshot = f"{KEPT_REPOSITORY}:{self.nonce}" if self.keep_snapshot else ""
        verdict.changes = changes.to_dict() if changes is not None else {}
        verdict.test_exit_code, verdict.test_seconds = result.exit_code, test_seconds
        verdict.log, verdict.log_tail = log, log[-4000:]
        return verdict

    def _copy_into_ahead(self, restore: bool, services: Recording) -> list[str] | None:
        """Make the verifier started ahead (from the task's image) hold the agent's files: what the agent deleted
        deleted, what it added or changed copied from its layer (`Sandbox.changes_archive`), less grading's own
        folders; then put back the image's tools there. None, and the verifier discarded, where a snapshot is needed
        instead: services to start again from it, a snapshot to keep, changes the runtime cannot hand over, or more
        than `COPY_LIMIT` bytes of them."""
        ahead, self.ahead = self.ahead, None
        assert ahead is not None and ahead.sandbox is not None
        if ahead.sandbox.image != self.sandbox.image or not _running(ahead.sandbox):  # a later step's image, say
            ahead.remove()
            return None
        copied = {path: kind for path, kind in self.changed.items() if path != LOGS_DIR and not _under(path, _GRADING_OWN)}
        written = [path for path, kind in copied.items() if kind != "deleted"]
        archive = None if services.services or self.keep_snapshot else self.sandbox.changes_archive(written, COPY_LIMIT)
        deleted = "\0".join(path for path, kind in copied.items() if kind == "deleted").encode("utf-8", "surrogateescape")
        if archive is None or len(deleted) > _DELETE_LIMIT:
            ahead.remove()
            return None
        self.verifier = ahead
        grader = ahead.sandbox
        assert grader is not None
        if deleted:
            encoded = base64.b64encode(deleted + b"\0").decode()
            result = grader.run(f"echo {encoded} | base64 -d | xargs -0 rm -rf --", timeout=120)
            if result.exit_code != 0:
                raise SandboxError(f"grading could not delete what the agent deleted: {result.output.text()[-500:]}")
        if written:
            grader.put_archive("/", archive)
        return restore_tools(grader, self.changed) if restore else []

    def _freeze(self, restore: bool) -> list[str]:
        """In the agent's stopped container: make its /logs/verifier and /tests plain directories, put back the
        image's tools, and commit it (`self.snapshot`)."""
        if any(_under(path, (LOGS_DIR, TESTS_DIR)) for path in self.changed):  # untouched, they are the image's
            self.sandbox.put_archive("/", entries_archive([(LOGS_DIR, "dir", ""), (VERIFIER_DIR, "dir", ""),
                                                           (TESTS_DIR, "dir", "")]))
        restored = restore_tools(self.sandbox, self.changed) if restore else []
        if self.keep_snapshot:  # an image that outlives this process: its user removes it
            self.snapshot = self.sandbox.commit(KEPT_REPOSITORY, self.nonce, role=KEPT_ROLE)
        else:
            self.snapshot = self.sandbox.commit(_SNAPSHOT_REPOSITORY, self.nonce)
        return restored

    def _keep_changes(self, grader: Sandbox) -> KeptChanges | None:
        """The agent's changes listed by `grade`, less `_NOT_KEPT`, read from the grading container before the tests
        run, if they are kept."""
        if self.changes_limit is None:
            return None
        kept = {path: kind for path, kind in self.changed.items() if not _left_out(path)}
        return keep_changes(kept, grader, limit=self.changes_limit)

    def _replay(self, services: Recording) -> None:
        """The agent's listening services started again beside the grader, in its network namespace only."""
        if services.services:
            assert self.snapshot is not None and self.verifier is not None and self.verifier.sandbox is not None
            grader = self.verifier.sandbox
            self.replay = ServiceReplay.start(self.snapshot, grader, services, role=ROLE, episode_id=self.task.name)

    def _end_replay(self) -> str:
        """Remove the services' container, if any; what it ran (`ServiceReplay.note`), or ""."""
        if self.replay is None:
            return ""
        note = self.replay.note()
        self.replay.remove()
        self.replay = None
        return note

    def _command(self) -> str:
        """test.sh with the verifier's environment, as [verifier] user if the task names one; the moment it
        exits, the same shell stops every other process (what the tests left running cannot write the
        reward after test.sh did), then exits with test.sh's status (`VerifierResult.test_exit_code`)."""
        verifier = self.task.config.verifier
        exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in verifier.env.items())
        run = f"bash {TESTS_DIR}/test.sh"
        if verifier.user:  # the fresh volume is root's: hand it to the user who writes the reward
            user = shlex.quote(verifier.user)
            run = f"chown {user} {VERIFIER_DIR} && runuser -u {user} -- {run}"
        return (f"{exports}cd {shlex.quote(self.sandbox.workdir)} 2>/dev/null || cd /\n{run}\ncode=$?\n"
                f"echo \"{_EXIT_LINE.format('$code')}\"\n{kill_all_script(exit_status=_TEST_STATUS)}")

    def clean_up(self) -> None:
        self._end_replay()  # before the grader: it lives in the grader's network namespace
        for verifier in (self.verifier, self.ahead):
            if verifier is not None:
                verifier.remove()
        if self.snapshot is not None and not self.keep_snapshot:
            self.runtime.remove_image(self.snapshot)


def _running(sandbox: Sandbox) -> bool:
    try:
        sandbox.ensure_running()
    except SandboxError:
        return False
    return True


def _left_out(path: str) -> bool:
    """Whether kept changes leave `path` out (`_NOT_KEPT`)."""
    return _under(path, _NOT_KEPT)


def _under(path: str, folders: tuple[str, ...]) -> bool:
    """Whether `path` is one of `folders` or inside one."""
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def read_reward(grader: Sandbox, *, on_host: str | None = None) -> VerifierResult:
    """The reward test.sh left in /logs/verifier of the stopped container: reward.txt (one float) for
    the reward, reward.json ({name: number}) for the scores (and the reward, from its "reward" key or
    the mean of its scores, when there is no reward.txt). Read through the engine, or from `on_host`, the
    /logs/verifier volume's directory on this host, where the runtime gives one (`Runtime.volume_directory`)."""
    texts: dict[str, str] = {}
    for name, limit in ((REWARD_TXT, REWARD_TXT_LIMIT), (REWARD_JSON, REWARD_JSON_LIMIT)):
        path = f"{VERIFIER_DIR}/{name}"
        found = _host_stat(f"{on_host}/{name}") if on_host is not None else grader.stat(path)
        if found is None:
            continue
        if found.kind != "file":
            return _bad(f"{path} is a {found.kind}, not a regular file")
        if found.size > limit:
            return _bad(f"{path} holds {found.size} bytes, more than the {limit} a reward file may")
        texts[name] = _host_text(f"{on_host}/{name}") if on_host is not None else _file_text(grader.read_archive(path))
    if not texts:
        return VerifierResult(0.0, reason="no_reward", detail=f"tests/test.sh wrote neither {REWARD_TXT} nor {REWARD_JSON}")
    try:
        scores = parse_scores(texts[REWARD_JSON]) if REWARD_JSON in texts else {}
        reward = parse_reward_txt(texts[REWARD_TXT]) if REWARD_TXT in texts else reward_of(scores)
    except ValueError as exc:
        return _bad(str(exc))
    reason = "solved" if reward >= 1 else "partial" if reward > 0 else "failed"
    return VerifierResult(reward, scores, reason=reason, detail=f"reward {reward:g}")


def parse_reward_txt(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{REWARD_TXT} holds {text.strip()[:80]!r}, not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{REWARD_TXT} holds {value}, not a finite number")
    return value


def parse_scores(text: str) -> dict[str, float]:
    """reward.json's {name: number}; ValueError for anything else (a string, a bool, NaN, a list)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"{REWARD_JSON} is not JSON: {text[:80]!r}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{REWARD_JSON} is not a non-empty JSON object of named scores")
    scores = {}
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{REWARD_JSON}: score {name!r} is {value!r}, not a finite number")
        scores[str(name)] = float(value)
    return scores


def reward_of(scores: dict[str, float]) -> float:
    """The reward of named scores: their "reward" entry, else their mean."""
    return scores["reward"] if "reward" in scores else sum(scores.values()) / len(scores)


def _host_stat(path: str) -> PathStat | None:
    """The kind and size of `path` on this host, not following a symbolic link, as `Sandbox.stat` gives them."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    mode = status.st_mode
    kind: Literal["dir", "symlink", "file", "other"] = (
        "dir" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "other")
    return PathStat(kind, status.st_size)


def _host_text(path: str) -> str:
    """The regular file at `path` (checked by `_host_stat`; the container that wrote it is stopped), not following a link."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with open(descriptor, "rb") as file:
        return file.read().decode("utf-8", "replace")


def _file_text(archive: bytes) -> str:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None and member.isfile() else None
        return extracted.read().decode("utf-8", "replace") if extracted is not None else ""


def _bad(detail: str) -> VerifierResult:
    return VerifierResult(0.0, reason="bad_reward", detail=detail)
