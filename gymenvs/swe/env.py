"""SWE-v0: fix a repository's issue inside a Docker container; graded host-side by its tests."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pydantic import PositiveInt

from gymenvs.core import ActionError, EndedBy, Outcome, ToolCall, ending, tool
from gymenvs.swe.base import SWEBaseEnv, SWEConfig
from gymenvs.swe.sandbox import (
    PersistentShell,
    SandboxError,
    WarmPool,
    decode_output,
    discard,
    install_sigterm_cleanup,
    reap_orphans_once,
    start_container,
)
from gymenvs.swe.sandbox.images import ensure_image

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


class SWEEnv(SWEBaseEnv):
    """SWE-v0. One SWE-Gym / SWE-bench task per episode, in its own container. Reward 1.0 when, after
    `submit` (or at the turn limit), the task's FAIL_TO_PASS tests pass and its PASS_TO_PASS tests
    still pass, graded in a fresh container; `info["report"]` has every test's status. Free text is
    run as a bash command. `reset(options={"instance_id": ...})` picks a task; else the seed does.

    Args:
        config: the tasks, container limits, timeouts and grading (`gymenvs.swe.base.SWEConfig`); its
            fields may also be given as keyword arguments (`dataset=`, `mem_limit=`, `warm_pool=`, ...),
            which override `config`'s.
        max_turns: turns allowed; the work is graded when they run out.
        render_mode: None or "ansi".
    """

    default_max_turns = 50

    def __init__(self, config: SWEConfig | None = None, *, max_turns: PositiveInt | None = None,
                 render_mode: str | None = None, **options: Any):
        super().__init__(config, max_turns=max_turns, render_mode=render_mode, **options)
        install_sigterm_cleanup()
        self._shell: PersistentShell | None = None

    # -- episodes ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = super().reset(seed=seed, options=options)
        info.update(instance_id=self.episode_task.instance_id, image=self.episode_sandbox.image)
        return observation, info

    def close(self) -> None:
        self._end_sandbox()
        self._release_containers()
        super().close()

    def _start_episode(self, options: dict[str, Any]) -> str:
        self._end_sandbox(wait=False)  # removed in the background: the next episode need not wait
        task = self.task = self.pick_task(options)
        self.report = None
        image = self.task_image()
        reap_orphans_once(self.client)
        if self.config.warm_pool:
            sandbox, shell, _ = self._pool_for(image).take(episode_id=self._episode_id or "")
            assert shell is not None  # SWE-v0's pool opens a shell in every container
        else:
            ensure_image(self.client, image, pull=self.config.pull)
            sandbox, shell = start_container(self.client, image, episode_id=self._episode_id or "", limits=self.limits,
                                             setup=self.shell_setup, environment=SHELL_ENVIRONMENT, workdir=self.workdir)
        shell.output_limit = self.config.output_limit
        self._sandbox, self._shell = sandbox, shell
        return self._prompt(task)

    def _prompt(self, task: Any) -> str:
        """The first observation: the task, the tools and how the work is graded."""
        return _PROMPT.format(repo=task.repo, workdir=self.workdir, commit=task.base_commit[:12],
                              problem=task.problem_statement.strip(), timeout=self.config.command_timeout_s)

    def _pool_for(self, image: str) -> WarmPool:
        pool = WarmPool.for_image(self.client, image, size=self.config.warm_pool, limits=self.limits, setup=self.shell_setup,
                                  environment=SHELL_ENVIRONMENT, pull=self.config.pull, workdir=self.workdir)
        if pool not in self._pools:
            pool.join()
            self._pools.append(pool)
        return pool

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("bash", {"command": text})

    def _run(self, call: ToolCall) -> Outcome:
        try:
            return super()._run(call)
        except SandboxError as exc:  # the container died or the engine failed: not the agent's doing
            self._end_sandbox()
            return Outcome.infra(f"The sandbox failed and the episode cannot go on: {exc}", exc.reason, str(exc))

    # -- tools --------------------------------------------------------------------------------

    @tool
    def bash(self, command: str) -> Outcome:
        """Run a bash command in a persistent shell in the working directory; cwd and variables carry over.

        Args:
            command: The command line, e.g. "grep -rn 'def slugify' ." (stdin is empty; it is stopped at the timeout).
        """
        if not command.strip():
            raise ActionError("bash: the command is empty")
        result = self._episode_shell.run(command, self.config.command_timeout_s)
        if result.timed_out:
            status = f"[timed out after {self.config.command_timeout_s:g} s: the command was stopped]"
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
            path: The file, absolute or relative to the working directory.
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
            path: The file, absolute or relative to the working directory.
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
            path: The file, absolute or relative to the working directory.
            content: The whole content of the file.
        """
        self._write_file(path, content.encode("utf-8", "surrogateescape"), 0o644)
        return f"Wrote {self._absolute(path)} ({len(content.splitlines())} lines)."

    @tool
    def submit(self) -> Outcome:
        """Finish: your changes to the repository are graded by its tests and the episode ends."""
        return self._grade()

    # -- internals -----------------------------------------------------------------------------

    def _grade(self, ended: dict[str, str] | None = None) -> Outcome:
        """Grade the agent's changes, read by the engine from its container, in a fresh container."""
        report, info = self._grade_and_end(ended)
        failed = info["outcome"] != EndedBy.MODEL  # no verdict on the agent: the episode is cut short
        if failed:
            info["error"] = report.error
        return Outcome(report.summary(), reward=report.reward, terminated=not failed, truncated=failed, info=info)

    def _end_at_turn_limit(self) -> Outcome:
        return self._grade(ending(EndedBy.MODEL, "turn_limit", f"{self.max_turns} turns"))

    def _release(self) -> None:
        self._end_sandbox()

    @property
    def _episode_shell(self) -> PersistentShell:
        if self._shell is None:
            raise RuntimeError("the episode has no shell: it has ended, or none started")
        return self._shell

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
        return str(PurePosixPath(self.workdir, path))

    def _read_file(self, path: str) -> tuple[bytes, int]:
        try:
            return self.episode_sandbox.read_file(self._absolute(path), _MAX_FILE_BYTES)
        except FileNotFoundError:
            raise ActionError(f"{self._absolute(path)} does not exist") from None
        except ValueError as exc:
            raise ActionError(str(exc)) from None

    def _read_text(self, path: str) -> str:
        return decode_output(self._read_file(path)[0])

    def _write_file(self, path: str, data: bytes, mode: int) -> None:
        target = PurePosixPath(self._absolute(path))
        self.episode_sandbox.put_files("/", {str(target.relative_to("/")): data}, mode=mode)
