"""Grading a Harbor task where the agent cannot reach: its `tests/test.sh` runs on a snapshot of the
agent's container, in a fresh container, and the reward is read by the engine.

`grade_task(sandbox, task)`, when the episode ends, through the sandbox's runtime only:

0. records the services the agent left running (the processes that listen on a TCP port:
   `gymenvs.terminal.services`);
1. stops the agent's container (SIGKILL to its init: the kernel kills every process in it, daemons
   included; no program of the container takes part);
2. with the container stopped, lists what the agent changed in its files (`Sandbox.changed_paths`), replaces
   whatever the agent left at /logs, /logs/verifier and /tests (a symbolic link, a file) by plain directories
   if it changed anything there, and puts back the image's tools on PATH (`toolguard`), all through the
   runtime's file operations;
3. commits the container (`Sandbox.commit`) and starts a fresh container from that snapshot, with the
   task's cpus, memory and storage, no network unless the task allows it, and two fresh empty
   volumes mounted over /logs/verifier and /tests (not copied from the snapshot);
4. copies the task's `tests/` from the host into /tests; if the agent's changed files are kept
   (`gymenvs.terminal.changes`), reads them from that container before anything runs in it; starts the recorded
   services again from the snapshot in a second container that shares only the grading container's network
   namespace, and runs `bash /tests/test.sh` with the verifier's time limit ([verifier] timeout_sec, or
   `timeout_s`) and environment;
5. kills every other process of that container the moment test.sh exits, then stops the
   container (nothing the tests started can write afterwards), and reads
   `/logs/verifier/reward.txt` (one float) or `reward.json` (named scores) through the engine,
   size-capped, never following a symbolic link.

What this guarantees, and what grading a container's state cannot, is in docs/terminal-security.md.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import shlex
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from gymenvs.container.agent.specs import AGENTS_ROOT, MOUNT
from gymenvs.container.output import decode_output
from gymenvs.container.runtime import Sandbox, SandboxError
from gymenvs.container.runtime.base import ChangeKind
from gymenvs.container.runtime.commands import entries_archive, kill_all_script
from gymenvs.core.outcomes import EndedBy, ending
from gymenvs.terminal.changes import KeptChanges, keep_changes
from gymenvs.terminal.services import Recording, ServiceReplay, record_services
from gymenvs.terminal.task import TerminalTask
from gymenvs.terminal.toolguard import restore_tools

LOGS_DIR = "/logs"
VERIFIER_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
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
_ROLE = "verifier"
_TEST_STATUS = '"$code"'  # the shell variable `_command` saves test.sh's exit status in
#: The line grading prints after test.sh's output, with its exit status.
_EXIT_LINE = "tests/test.sh exited {}"
#: Where gymenvs' own processes in an agent's container come from (its channel, the agent CLIs): not services.
_GYMENVS_PATHS = (MOUNT, AGENTS_ROOT)
#: What kept changes leave out: not the agent's work (the kernel's and the engine's file systems, gymenvs' own files)
#: or what grading mounts afresh.
_NOT_KEPT = ("/proc", "/sys", "/dev", *_GYMENVS_PATHS, VERIFIER_DIR, TESTS_DIR)


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
               services: Recording | None = None) -> VerifierResult:
    """Grade what the agent left in `sandbox` (the episode's container, which this stops) by the task's
    tests. `timeout_s` overrides [verifier] timeout_sec; `restore=False` skips putting back the image's
    tools (for a task whose goal is to change them); for `gymenvs tasks regrade`, `keep_snapshot` keeps the graded
    snapshot as the image `VerifierResult.snapshot` names, and `changes_limit` keeps the agent's changed files in
    `VerifierResult.changes` if compressed they take at most that many bytes; `services`, the services to start again
    for the tests instead of those listening in `sandbox` (a re-grading's, recorded by the episode's grading in
    `VerifierResult.recorded`). Engine failures come back as an infra result."""
    started = time.monotonic()
    if not task.test_script.is_file():
        return VerifierResult(None, outcome=EndedBy.INVALID, reason="broken_task", detail=f"{task.test_script} is missing")
    timeout = timeout_s if timeout_s is not None else task.config.verifier.timeout_sec
    run = _GradingRun(sandbox, task, uuid.uuid4().hex[:12], keep_snapshot=keep_snapshot, changes_limit=changes_limit)
    try:
        result = run.grade(timeout, restore, services)
    except SandboxError as exc:
        result = VerifierResult(None, outcome=EndedBy.INFRA, reason="grading_error", detail=f"grading could not run: {exc}")
    finally:
        run.clean_up()
    result.seconds = time.monotonic() - started
    return result


class _GradingRun:
    """One grading: the snapshot image, the volumes and the container it made, removed by `clean_up`."""

    def __init__(self, sandbox: Sandbox, task: TerminalTask, nonce: str, *, keep_snapshot: bool = False,
                 changes_limit: int | None = None):
        self.sandbox, self.task, self.nonce = sandbox, task, nonce
        self.runtime = sandbox.runtime
        self.keep_snapshot = keep_snapshot
        self.changes_limit = changes_limit
        self.changed: dict[str, ChangeKind] = {}
        self.snapshot: str | None = None
        self.volumes: list[str] = []
        self.grader: Sandbox | None = None
        self.replay: ServiceReplay | None = None

    def grade(self, timeout: float, restore: bool, services: Recording | None = None) -> VerifierResult:
        if services is None:
            services = record_services(self.sandbox, ignore=_GYMENVS_PATHS)
        restored = self._freeze(restore)
        self.grader = grader = self._start_grader()
        grader.put_archive(TESTS_DIR, tests_archive(self.task))
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
            verdict = read_reward(grader)
        verdict.restored, verdict.services, verdict.recorded = restored, replayed, services.to_list()
        verdict.snapshot = f"{KEPT_REPOSITORY}:{self.nonce}" if self.keep_snapshot else ""
        verdict.changes = changes.to_dict() if changes is not None else {}
        verdict.test_exit_code, verdict.test_seconds = result.exit_code, test_seconds
        verdict.log, verdict.log_tail = log, log[-4000:]
        return verdict

    def _freeze(self, restore: bool) -> list[str]:
        """Stop the agent's container, list what it changed, make its /logs/verifier and /tests plain directories,
        put back the image's tools, and commit it."""
        self.sandbox.stop()
        self.changed = self.sandbox.changed_paths("/")  # the agent's: grading's own below change no tool
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
        """The agent's changes listed by `_freeze`, less `_NOT_KEPT`, read from the grading container before the tests
        run, if they are kept."""
        if self.changes_limit is None:
            return None
        kept = {path: kind for path, kind in self.changed.items() if not _left_out(path)}
        return keep_changes(kept, grader, limit=self.changes_limit)

    def _replay(self, services: Recording) -> None:
        """The agent's listening services started again beside the grader, in its network namespace only."""
        if services.services:
            assert self.snapshot is not None and self.grader is not None
            self.replay = ServiceReplay.start(self.snapshot, self.grader, services, role=_ROLE, episode_id=self.task.name)

    def _end_replay(self) -> str:
        """Remove the services' container, if any; what it ran (`ServiceReplay.note`), or ""."""
        if self.replay is None:
            return ""
        note = self.replay.note()
        self.replay.remove()
        self.replay = None
        return note

    def _start_grader(self) -> Sandbox:
        volumes = {self._volume(name): target for name, target in (("logs", VERIFIER_DIR), ("tests", TESTS_DIR))}
        environment = self.task.config.environment
        limits = dataclasses.replace(self.sandbox.limits, cpus=environment.cpus, mem_limit=f"{environment.memory_mb}m",
                                     disk_limit=environment.storage_mb << 20,
                                     **network_limits(*self.task.config.verifier_network))
        assert self.snapshot is not None
        return self.runtime.start(self.snapshot, role=_ROLE, episode_id=self.task.name, limits=limits,
                                  workdir=self.sandbox.workdir, volumes=volumes)

    def _volume(self, name: str) -> str:
        volume = self.runtime.create_volume(f"gymenvs-terminal-{self.nonce}-{name}", role=_ROLE)
        self.volumes.append(volume)
        return volume

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
        if self.grader is not None:
            self.grader.remove()
        for name in self.volumes:
            self.runtime.remove_volume(name)
        if self.snapshot is not None and not self.keep_snapshot:
            self.runtime.remove_image(self.snapshot)


def _left_out(path: str) -> bool:
    """Whether kept changes leave `path` out (`_NOT_KEPT`)."""
    return _under(path, _NOT_KEPT)


def _under(path: str, folders: tuple[str, ...]) -> bool:
    """Whether `path` is one of `folders` or inside one."""
    return any(path == folder or path.startswith(folder + "/") for folder in folders)


def network_limits(mode: str, hosts: tuple[str, ...] = ()) -> dict[str, Any]:
    """The `Limits` fields of a Harbor network mode: "public" the network, "allowlist" only `hosts`, else none."""
    return {"network": mode in ("public", "allowlist"), "allowed_hosts": hosts if mode == "allowlist" else None}


def tests_archive(task: TerminalTask) -> bytes:
    """The task's tests/ folder (a step's view: the step's tests/ over it), read on the host, as a tar owned by
    root (test.sh executable)."""
    archive = io.BytesIO()

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=archive, mode="w") as tar:
        for folder in task.test_folders:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=path.name, filter=owned_by_root)
    return archive.getvalue()


def read_reward(grader: Sandbox) -> VerifierResult:
    """The reward test.sh left in /logs/verifier of the stopped container: reward.txt (one float) for
    the reward, reward.json ({name: number}) for the scores (and the reward, from its "reward" key or
    the mean of its scores, when there is no reward.txt)."""
    texts: dict[str, str] = {}
    for name, limit in ((REWARD_TXT, REWARD_TXT_LIMIT), (REWARD_JSON, REWARD_JSON_LIMIT)):
        path = f"{VERIFIER_DIR}/{name}"
        stat = grader.stat(path)
        if stat is None:
            continue
        if stat.kind != "file":
            return _bad(f"{path} is a {stat.kind}, not a regular file")
        if stat.size > limit:
            return _bad(f"{path} holds {stat.size} bytes, more than the {limit} a reward file may")
        texts[name] = _file_text(grader.read_archive(path))
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


def _file_text(archive: bytes) -> str:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None and member.isfile() else None
        return extracted.read().decode("utf-8", "replace") if extracted is not None else ""


def _bad(detail: str) -> VerifierResult:
    return VerifierResult(0.0, reason="bad_reward", detail=detail)
