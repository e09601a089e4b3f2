"""SWE-v0: fix a repository's issue inside a Docker container; graded host-side by its tests."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import Field, PositiveFloat, PositiveInt

from gymenvs.core import ActionError, Outcome, TextEnv, ToolCall, tool, validate_config
from gymenvs.swe.grading import TEST_USER, GradeReport, grade_sandbox
from gymenvs.swe.sandbox import (
    Limits,
    PersistentShell,
    Sandbox,
    SandboxError,
    WarmPool,
    decode_output,
    discard,
    install_sigterm_cleanup,
    reap_orphans_once,
    shared_client,
    start_container,
)
from gymenvs.swe.sandbox.images import ENV_SETUP, WORKDIR, check_template, ensure_image, image_for
from gymenvs.swe.tasks import FIXTURES, Task, load_tasks

#: Environment of the agent's shell: no pagers or progress bars waiting on a terminal.
SHELL_ENVIRONMENT = {
    "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat", "TERM": "dumb", "LANG": "C.UTF-8",
    "PIP_PROGRESS_BAR": "off", "PIP_NO_INPUT": "1", "TQDM_DISABLE": "1", "DEBIAN_FRONTEND": "noninteractive",
}
_MAX_FILE_BYTES = 1 << 20
_PROMPT = """You are working in the git repository {repo} at {workdir} (base commit {commit}). Resolve this issue:

<issue>
{problem}
</issue>

Tools: `bash` runs a command in a persistent shell (the working directory and variables carry over; \
each command may take {timeout:g} s; long output is cut in the middle); `view_file`, `edit_file` and \
`create_file` work on files; `submit` ends the episode. Your changes (the git diff against the base \
commit) are then graded by the repository's tests, which you do not see. Changes to test files, \
conftest.py files and pytest configuration are not applied when grading."""


class SWEEnv(TextEnv):
    """SWE-v0. One SWE-Gym / SWE-bench task per episode, in its own container. Reward 1.0 when, after
    `submit` (or at the turn limit), the task's FAIL_TO_PASS tests pass and its PASS_TO_PASS tests
    still pass, graded in a fresh container; `info["report"]` has every test's status. Free text is
    run as a bash command. `reset(options={"instance_id": ...})` picks a task; else the seed does.

    Args:
        dataset: "fixtures" (shipped tasks), a .json/.jsonl/.parquet file, or a Hub dataset name.
        split: the dataset split (default: the only one, or "test").
        instance_ids: restrict the episodes to these tasks.
        image_template: image name for rows without an `image`, with fields {instance_id},
            {swebench_id}, {swegym_id}, {repo}, {version} (default: the SWE-Gym / SWE-bench convention).
        pull: pull a missing image from its registry (default: no; a missing image fails at reset,
            saying how to build or pull it).
        command_timeout: seconds one bash command may run before it is stopped.
        grading_timeout: seconds the tests may run when grading.
        output_limit: bytes of a command's output shown (its head and tail).
        network: give the agent's container network access.
        mem_limit: memory of each container (docker syntax, e.g. "2g").
        cpus: CPUs of each container.
        pids_limit: processes allowed in each container.
        disk_limit: bytes a container may write (docker syntax, e.g. "10g"); the episode is stopped
            beyond it.
        warm_pool: containers kept started ahead of time per image (0: none), so that `reset` does not
            wait for `docker run`. Each is used by one episode only, then removed.
        grade_as_root: run the tests as root when grading (as SWE-bench does) instead of an
            unprivileged user; for repositories whose tests need root.
        max_turns: turns allowed; the work is graded when they run out.
        render_mode: None or "ansi".
    """

    default_max_turns = 50
    reset_option_keys = frozenset({"instance_id"})

    @validate_config
    def __init__(
        self,
        *,
        dataset: str = FIXTURES,
        split: str | None = None,
        instance_ids: Sequence[str] | None = None,
        image_template: str | None = None,
        pull: bool = False,
        command_timeout: PositiveFloat = 60.0,
        grading_timeout: PositiveFloat = 1800.0,
        output_limit: Annotated[int, Field(ge=256, le=1 << 20)] = 10_000,
        network: bool = False,
        mem_limit: Annotated[str, Field(pattern=r"^[0-9]+[bkmgBKMG]?$")] = "2g",
        cpus: PositiveFloat = 1.0,
        pids_limit: PositiveInt = 512,
        disk_limit: Annotated[str, Field(pattern=r"^[0-9]+[bkmgBKMG]?$")] = "10g",
        warm_pool: Annotated[int, Field(ge=0, le=256)] = 0,
        grade_as_root: bool = False,
        max_turns: PositiveInt | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.tasks = _select(load_tasks(dataset, split=split), instance_ids)
        self.image_template = check_template(image_template) if image_template is not None else None
        self.pull = pull
        self.command_timeout = command_timeout
        self.grading_timeout = grading_timeout
        self.output_limit = output_limit
        self.limits = Limits(mem_limit=mem_limit, cpus=cpus, pids_limit=pids_limit, network=network,
                             disk_limit=_bytes(disk_limit))
        self.warm_pool = warm_pool
        self.test_user = None if grade_as_root else TEST_USER
        install_sigterm_cleanup()
        self.task: Task | None = None
        self.report: GradeReport | None = None
        self._sandbox: Sandbox | None = None
        self._shell: PersistentShell | None = None
        self._pools: list[WarmPool] = []
        self._removals: list[Future] = []

    @property
    def client(self) -> Any:
        """The process's docker client, created at the first reset (constructing an env touches no engine)."""
        return shared_client()

    @property
    def reaped(self) -> list[str]:
        """Containers of dead processes this process removed at its first reset (it reaps once)."""
        return reap_orphans_once(self.client)

    # -- episodes ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info.update(instance_id=self.task.instance_id, image=self._sandbox.image)
        return observation, info

    def close(self) -> None:
        self._end_sandbox()
        for removal in self._removals:
            removal.result()
        self._removals.clear()
        for pool in self._pools:
            pool.leave()
        self._pools.clear()
        super().close()

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._end_sandbox(wait=False)  # removed in the background: the next episode need not wait
        self.task = self._pick_task(options)
        self.report = None
        image = image_for(self.task, self.image_template)
        reap_orphans_once(self.client)
        if self.warm_pool:
            self._sandbox, self._shell = self._pool_for(image).take(episode_id=self._episode_id)
        else:
            ensure_image(self.client, image, pull=self.pull)
            self._sandbox, self._shell = start_container(self.client, image, episode_id=self._episode_id, limits=self.limits,
                                                         setup=ENV_SETUP, environment=SHELL_ENVIRONMENT)
        self._shell.output_limit = self.output_limit
        return _PROMPT.format(repo=self.task.repo, workdir=WORKDIR, commit=self.task.base_commit[:12],
                              problem=self.task.problem_statement.strip(), timeout=self.command_timeout)

    def _pool_for(self, image: str) -> WarmPool:
        pool = WarmPool.for_image(self.client, image, size=self.warm_pool, limits=self.limits, setup=ENV_SETUP,
                                  environment=SHELL_ENVIRONMENT, pull=self.pull)
        if pool not in self._pools:
            pool.join()
            self._pools.append(pool)
        return pool

    def _pick_task(self, options: dict[str, Any]) -> Task:
        if "instance_id" not in options:
            return self.tasks[int(self.np_random.integers(len(self.tasks)))]
        for task in self.tasks:
            if task.instance_id == options["instance_id"]:
                return task
        known = ", ".join(t.instance_id for t in self.tasks[:5]) + (", ..." if len(self.tasks) > 5 else "")
        raise ValueError(f"instance_id={options['instance_id']!r} is not a task of this env ({len(self.tasks)} tasks: {known})")

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("bash", {"command": text})

    def _run(self, call: ToolCall) -> Outcome:
        try:
            return super()._run(call)
        except SandboxError as exc:  # the container died or the engine failed: not the agent's doing
            self._end_sandbox()
            return Outcome(f"The sandbox failed and the episode cannot go on: {exc}", truncated=True,
                           info={"error": str(exc)})

    def _at_turn_limit(self, outcome: Outcome) -> Outcome:
        graded = self._grade()
        graded.observation = outcome.observation + "\n" + graded.observation
        graded.info = {**outcome.info, **graded.info}
        graded.terminated = False  # the turn limit truncates the episode; the reward is the grade
        return graded

    # -- tools --------------------------------------------------------------------------------

    @tool
    def bash(self, command: str) -> Outcome:
        """Run a bash command in the repository's persistent shell; cwd and variables carry over.

        Args:
            command: The command line, e.g. "grep -rn 'def slugify' ." (stdin is empty; it is stopped at the timeout).
        """
        if not command.strip():
            raise ActionError("bash: the command is empty")
        result = self._shell.run(command, self.command_timeout)
        if result.timed_out:
            status = f"[timed out after {self.command_timeout:g} s: the command was stopped]"
        elif result.exit_code is None:
            status = "[no exit code: the shell was restarted]"
        else:
            status = f"[exit code: {result.exit_code}]"
        info = {"exit_code": result.exit_code, "timed_out": result.timed_out, "shell_restarted": result.restarted}
        output = result.output or "(no output)\n"
        return Outcome(output + ("" if output.endswith("\n") else "\n") + status, info=info)

    @tool
    def view_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Show a file with line numbers.

        Args:
            path: The file, absolute or relative to /testbed.
            start_line: The first line to show (1-based).
            end_line: The last line to show (default: the end of the file).
        """
        lines = self._read_text(path).splitlines()
        last = len(lines) if end_line is None else min(end_line, len(lines))
        if start_line < 1 or start_line > max(len(lines), 1) or (end_line is not None and end_line < start_line):
            raise ActionError(f"view_file: lines {start_line}..{end_line} are not within 1..{len(lines)}")
        numbered = [f"{n:6}\t{line}" for n, line in enumerate(lines[start_line - 1 : last], start_line)]
        return "\n".join(numbered) if numbered else f"({path} is empty)"

    @tool
    def edit_file(self, path: str, old_text: str, new_text: str) -> str:
        """Replace text in a file: `old_text` must occur exactly once.

        Args:
            path: The file, absolute or relative to /testbed.
            old_text: The exact text to replace, with enough context to be unique.
            new_text: The text to put in its place.
        """
        if not old_text:
            raise ActionError("edit_file: old_text is empty; use create_file to write a whole file")
        content, mode = self._read_file(path)
        text = content.decode("utf-8", "surrogateescape")
        count = text.count(old_text)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ActionError(f"edit_file: old_text {where} in {path}; it must occur exactly once")
        self._write_file(path, text.replace(old_text, new_text).encode("utf-8", "surrogateescape"), mode)
        return f"Edited {self._absolute(path)}."

    @tool
    def create_file(self, path: str, content: str) -> str:
        """Write a file, replacing it if it exists; missing directories are created.

        Args:
            path: The file, absolute or relative to /testbed.
            content: The whole content of the file.
        """
        self._write_file(path, content.encode("utf-8", "surrogateescape"), 0o644)
        return f"Wrote {self._absolute(path)} ({len(content.splitlines())} lines)."

    @tool
    def submit(self) -> Outcome:
        """Finish: your changes to the repository are graded by its tests and the episode ends."""
        return self._grade()

    # -- internals -----------------------------------------------------------------------------

    def _grade(self) -> Outcome:
        """Stop the agent's processes, grade its changes (read by the engine) in a fresh container."""
        image = image_for(self.task, self.image_template)
        try:
            self._sandbox.client.api.pause(self._sandbox.id)  # nothing the agent left running changes its files now
        except Exception:  # already gone: grading reports what it can read
            pass
        try:
            self.report, diff = grade_sandbox(self.client, self.task, self._sandbox, image=image,
                                              timeout=self.grading_timeout, test_user=self.test_user,
                                              limits=dataclasses.replace(self.limits, network=False),
                                              episode_id=self._episode_id)
        finally:
            self._end_sandbox()
        info = {"report": self.report.to_dict(), "status": self.report.status, "patch": diff}
        failed = self.report.status == "error"
        if failed:
            info["error"] = self.report.error
        return Outcome(self.report.summary(), reward=self.report.reward, terminated=not failed, truncated=failed, info=info)

    def _end_sandbox(self, wait: bool = True) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self._sandbox is not None:
            removal = discard(self._sandbox, wait=wait)
            self._removals = [r for r in self._removals if not r.done()] + ([removal] if removal else [])
            self._sandbox = None

    def _absolute(self, path: str) -> str:
        if not path.strip():
            raise ActionError("the path is empty")
        return str(PurePosixPath(WORKDIR, path))

    def _read_file(self, path: str) -> tuple[bytes, int]:
        try:
            return self._sandbox.read_file(self._absolute(path), _MAX_FILE_BYTES)
        except FileNotFoundError:
            raise ActionError(f"{self._absolute(path)} does not exist") from None
        except ValueError as exc:
            raise ActionError(str(exc)) from None

    def _read_text(self, path: str) -> str:
        return decode_output(self._read_file(path)[0])

    def _write_file(self, path: str, data: bytes, mode: int) -> None:
        target = PurePosixPath(self._absolute(path))
        self._sandbox.put_files("/", {str(target.relative_to("/")): data}, mode=mode)

    def _episode_state(self) -> dict[str, Any]:
        return {
            "instance_id": self.task.instance_id if self.task else None,
            "container": self._sandbox.name if self._sandbox else None,
            "status": self.report.status if self.report else None,
        }


def _bytes(size: str) -> int:
    """Docker's size syntax ("512m", "10g") in bytes."""
    number, unit = re.fullmatch(r"([0-9]+)([bkmg]?)", size.lower()).groups()
    return int(number) << {"": 0, "b": 0, "k": 10, "m": 20, "g": 30}[unit]


def _select(tasks: tuple[Task, ...], instance_ids: Sequence[str] | None) -> tuple[Task, ...]:
    if instance_ids is None:
        return tasks
    by_id = {task.instance_id: task for task in tasks}
    unknown = [i for i in instance_ids if i not in by_id]
    if unknown or not instance_ids:
        raise ValueError(f"instance_ids={list(instance_ids)!r}: {unknown or 'empty'} not in the dataset")
    return tuple(by_id[i] for i in instance_ids)
