"""`ToolsEnv`: the policy acts in the task's container through tools (SWE-v0 and Terminal-v0).

`bash` runs a command in a persistent shell; `view_file`, `edit_file` and `create_file` work on files
through the runtime; `submit` ends the episode, and the task family grades the container.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pydantic import PositiveInt

from gymenvs.container.env import ContainerEnv, FamilyLike, present
from gymenvs.container.family import Task
from gymenvs.container.output import decode_output
from gymenvs.container.pool import start_container
from gymenvs.container.runtime import Runtime, SandboxError
from gymenvs.container.shell import PersistentShell
from gymenvs.core import ActionError, EndedBy, Outcome, ToolCall, ending, tool

#: Environment of the agent's shell: no pagers or progress bars waiting on a terminal.
SHELL_ENVIRONMENT = {
    "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat", "TERM": "dumb", "LANG": "C.UTF-8",
    "PIP_PROGRESS_BAR": "off", "PIP_NO_INPUT": "1", "TQDM_DISABLE": "1", "DEBIAN_FRONTEND": "noninteractive",
}
_MAX_FILE_BYTES = 1 << 20
_TOOLS = ("Tools: `bash` runs a command in a persistent shell (the working directory and variables carry over; "
          "each command may take {timeout:g} s; long output is cut in the middle); `view_file`, `edit_file` and "
          "`create_file` work on files; `submit` ends the episode.")


class ToolsEnv(ContainerEnv):
    """One task of `family` per episode, in its own container; the policy acts with `bash`, `view_file`,
    `edit_file`, `create_file` and `submit`. After `submit` (or at the turn limit) the family grades the
    container where the agent cannot reach; `info["report"]` holds its report. Free text is run as a bash
    command. `reset(options={"instance_id": ...})` picks a task; else the seed does.

    Registered as gymenvs/SWE-v0 (`family="gymenvs.swe.family:SWEFamily"`) and gymenvs/Terminal-v0
    (`family="gymenvs.terminal.family:HarborFamily"`).

    Args:
        family: the task family (a `TaskFamily`, its class or "module:Class").
        runtime: "docker" (the default) or "podman", or a `Runtime` object: what every engine operation goes
            through (`ContainerEnv`).
        engine: with a runtime name, its engine's URL (default: the runtime's own default).
        max_turns: turns allowed; the work is graded when they run out.
        render_mode: None or "ansi".
        **options: the family's options (`dataset=`, `instance_ids=`...) and the env's (`ContainerConfig`:
            `warm_pool=`, `command_timeout_s=`...).
    """

    default_max_turns = 50

    def __init__(self, family: FamilyLike, *, runtime: Runtime | str = "docker", engine: str | None = None,
                 max_turns: PositiveInt | None = None, render_mode: str | None = None, **options: Any):
        super().__init__(family, runtime=runtime, engine=engine, max_turns=max_turns, render_mode=render_mode, **options)
        self._shell: PersistentShell | None = None

    def _begin(self, task: Task) -> str:
        image = self.episode_image
        if self._pooled:
            warm = self._pool(image.name, setup=image.setup, environment=SHELL_ENVIRONMENT).take(
                episode_id=self._episode_id or "")
            sandbox, shell = warm.sandbox, warm.shell
            assert shell is not None  # these pools open a shell in every container
        else:
            sandbox, shell = start_container(self.runtime, image.name, episode_id=self._episode_id or "", limits=self.limits,
                                             setup=image.setup, environment=SHELL_ENVIRONMENT, workdir=image.workdir)
        shell.output_limit = self.config.output_limit
        self._sandbox, self._shell = sandbox, shell
        self.family.prepare_step(task, sandbox)
        return self.family.prompt(task, workdir=image.workdir, tools=_TOOLS.format(timeout=self.config.command_timeout_s))

    def _parse_text(self, text: str) -> ToolCall:
        return ToolCall("bash", {"command": text})

    def _run(self, call: ToolCall) -> Outcome:
        try:
            return super()._run(call)
        except SandboxError as exc:  # the container died or the engine failed: not the agent's doing
            self._release()
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
        """Finish: your work is graded by the task's tests and the episode ends (or, for a task of several steps,
        its next step begins)."""
        return self._grade()

    # -- internals -----------------------------------------------------------------------------

    def _grade(self, ended: dict[str, str] | None = None) -> Outcome:
        """Have the family grade the episode's container."""
        grade, info, next_step = self._grade_and_end(ended)
        if next_step is not None:  # the step is done; the agent reads the next one's instruction, not its grade
            return Outcome(f"Step {self.step_index} of the task is done. Its next step:\n\n{next_step}", info=info)
        failed = info["outcome"] != EndedBy.MODEL  # no verdict on the agent: the episode is cut short
        if failed:
            info["error"] = grade.detail
        return Outcome(grade.summary, reward=grade.reward, terminated=not failed, truncated=failed, info=info)

    def _end_at_turn_limit(self) -> Outcome:
        return self._grade(ending(EndedBy.MODEL, "turn_limit", f"{self.max_turns} turns"))

    def _release(self, wait: bool = True) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        self._discard_sandbox(wait)

    @property
    def _episode_shell(self) -> PersistentShell:
        return present(self._shell, "the episode has no shell: it has ended, or none started")

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
