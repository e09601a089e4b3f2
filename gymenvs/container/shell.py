"""A persistent bash shell per episode, driven over one exec stream of its sandbox.

Each command is sent as one line, `eval $'<command>' </dev/null; printf '\\n<marker> %d\\n' "$?"`,
to a `bash -s` that reads its script from the socket. So `cd`, exported and plain variables,
functions and an activated virtualenv carry over between commands, and a command costs a write and
a read on an open stream instead of a new exec (about 0.2 ms against 50 ms with Docker here). The command
text is ANSI-C quoted, so no command can break the framing; it reads /dev/null, so it cannot eat
the next command; the end marker holds a fresh random nonce, so output cannot fake it.

A command that outlives its timeout is stopped inside the container: SIGTERM to every process in it
but init and the shell (jobs that double-forked away from the shell and fork-bomb children
included), SIGKILL after a grace period, and, if the shell itself still does not answer (a
`while :; do :; done` in the shell), a new shell replaces it. Output beyond the budget is cut in
the middle on the host while it streams, so memory stays bounded. While a command runs, the
container's writable layer is checked against its disk limit (`Sandbox.check_disk`).
"""

from __future__ import annotations

import base64
import shlex
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from gymenvs.container.output import OutputCapture
from gymenvs.container.runtime.base import ExecProcess, ExecResult, Sandbox, SandboxError
from gymenvs.container.runtime.commands import DISK_CHECK_INTERVAL, tar_archive

#: Seconds a dying container may take to be seen stopped by the engine after its processes' streams ended.
_SETTLE_S = 2.0
#: The largest archive `ShellSandbox.put_archive` sends through the shell, as one line of base64.
_SHELL_ARCHIVE_LIMIT = 4 << 20
_QUOTE_TABLE = {ord("\\"): "\\\\", ord("'"): "\\'", ord("\n"): "\\n", ord("\t"): "\\t", 0: None}
_QUOTE_TABLE.update({c: f"\\x{c:02x}" for c in [*range(1, 32), 127] if c not in _QUOTE_TABLE})


@dataclass
class ShellResult:
    output: str
    #: The command's exit status; None when the shell had to be replaced before it reported one.
    exit_code: int | None
    timed_out: bool
    #: The shell died or had to be killed and a new one started: cwd and variables are back to the start.
    restarted: bool
    #: The output as captured (its bytes, and how many were cut: `output` is its text).
    capture: OutputCapture = field(repr=False)


def ansi_c_quote(text: str) -> str:
    """`text` as a bash `$'...'` word on one line (NUL bytes, which bash strings cannot hold, are dropped)."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot reach bash
    return "$'" + text.translate(_QUOTE_TABLE) + "'"


class PersistentShell:
    """One bash process in `sandbox` that runs the episode's commands in turn."""

    def __init__(self, sandbox: Sandbox, *, setup: str = "", environment: dict[str, str] | None = None,
                 output_limit: int = 10_000, kill_grace: float = 2.0, start_timeout: float = 60.0):
        self.sandbox = sandbox
        self.setup = setup
        self.environment = environment or {}
        self.output_limit = output_limit
        self.kill_grace = kill_grace
        self.start_timeout = start_timeout
        self.pid = 0
        self._stream: ExecProcess | None = None
        self._pending = bytearray()  # output that arrived after the last end marker (background jobs)
        self._start()

    def run(self, command: str, timeout: float, *, output_limit: int | None = None) -> ShellResult:
        """Run `command` in the shell; stop it and everything it started after `timeout` seconds. Output past
        `output_limit` bytes (default: the shell's) is cut in the middle."""
        marker = f"__gymenvs_done_{uuid.uuid4().hex}__"
        self._send(f"eval {ansi_c_quote(command)} </dev/null; printf '\\n%s %d\\n' {marker} \"$?\"\n")
        capture = OutputCapture(self.output_limit if output_limit is None else output_limit)
        deadline = time.monotonic() + timeout
        escalation = iter(("TERM", "KILL"))
        timed_out = False
        while True:
            exit_code = self._read_until_marker(marker, capture, deadline)
            if exit_code is not None:
                if timed_out:  # what ignored SIGTERM or kept forking dies now
                    self._kill_others("KILL")
                return ShellResult(capture.text(), exit_code, timed_out, False, capture)
            if self._process().eof:  # the shell exited (`exit`, `exec ...`) or the container died
                self.sandbox.ensure_running()
                return self._restart(capture, timed_out, "the shell exited")
            timed_out = True
            signal = next(escalation, None)
            if signal is None:
                return self._restart(capture, timed_out, "the shell did not answer after the timeout")
            self._kill_others(signal)
            deadline = time.monotonic() + self.kill_grace

    def alive(self) -> bool:
        """Whether the shell still runs, checked without running anything in the container."""
        return self._stream is not None and not self._stream.closed()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    # -- internals -------------------------------------------------------------------------

    def _start(self) -> None:
        self._stream = self.sandbox.open_exec(["bash", "--noprofile", "--norc", "-s"], stdin=True, environment=self.environment)
        ready = f"__gymenvs_ready_{uuid.uuid4().hex}__"
        self._send(f"exec 2>&1\n{self.setup}\nprintf '\\n%s %d\\n' {ready} \"$$\"\n")
        discard = OutputCapture(4096)
        pid = self._read_until_marker(ready, discard, time.monotonic() + self.start_timeout)
        if pid is None:
            self._ensure_running_once_settled()
            raise SandboxError(f"the shell did not start in {self.start_timeout:g} s: {discard.text()[-500:]}")
        self.pid = pid
        self._pending.clear()

    def _ensure_running_once_settled(self) -> None:
        """`ensure_running`, waiting up to `_SETTLE_S` when the shell's stream has ended: the streams of a container
        the OOM killer is stopping end before the engine says it stopped."""
        deadline = time.monotonic() + (_SETTLE_S if self._process().eof else 0.0)
        while True:
            self.sandbox.ensure_running()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def _restart(self, capture: OutputCapture, timed_out: bool, why: str) -> ShellResult:
        if self.pid:
            self.sandbox.run(f"kill -9 {self.pid} 2>/dev/null; true", timeout=10)
        self.close()
        self._start()
        note = f"\n[{why}; a new shell was started in {self.sandbox.workdir}: the working directory and variables were reset]"
        return ShellResult(capture.text() + note, None, timed_out, True, capture)

    def _process(self) -> ExecProcess:
        if self._stream is None:
            raise SandboxError("the shell is closed")
        return self._stream

    def _send(self, line: str) -> None:
        self._process().send(line.encode("utf-8", "replace"))

    def _read_until_marker(self, marker: str, capture: OutputCapture, deadline: float) -> int | None:
        """Feed output to `capture` until `\\n<marker> <number>\\n`; return the number, or None at the
        deadline or the end of the stream."""
        end = b"\n" + marker.encode() + b" "
        buffer = self._pending
        while True:
            found = buffer.find(end)
            if found >= 0:
                line_end = buffer.find(b"\n", found + len(end))
                if line_end >= 0:
                    capture.feed(bytes(buffer[:found]))
                    number = int(buffer[found + len(end) : line_end])
                    del buffer[: line_end + 1]
                    return number
            safe = found if found >= 0 else len(buffer) - len(end) + 1  # keep what may start the marker
            if safe > 0:
                capture.feed(bytes(buffer[:safe]))
                del buffer[:safe]
            data = self._process().read(min(deadline, time.monotonic() + DISK_CHECK_INTERVAL))
            self.sandbox.check_disk()
            if data is None:  # silent for a while: a container paused from outside would keep it so until the deadline
                self.sandbox.ensure_running()
            if data == b"" or (data is None and time.monotonic() >= deadline):
                return None  # end of stream, or the deadline
            buffer += data or b""

    def _kill_others(self, signal: str) -> None:
        self.sandbox.kill_all(signal, keep=(self.pid,))


class ShellSandbox:
    """`sandbox` with `run`, `put_files` and `put_archive` going through one persistent shell in it: a command costs a
    write and a read on an open stream instead of a new exec (the grading of an SWE fixture runs about a dozen).
    For a container whose programs are trusted (a grading container before its tests run): each command
    runs in a subshell in the sandbox's working directory (nothing carries over from one to the next, as
    with `Sandbox.run`), stopped with everything it started after its timeout (`kill_after` is not used: the
    shell's own grace applies). The rest is the sandbox's own. `close` ends the shell."""

    def __init__(self, sandbox: Sandbox):
        self._sandbox = sandbox
        self._shell = PersistentShell(sandbox)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sandbox, name)

    def run(self, command: str, *, timeout: float, output_limit: int = 1 << 20, kill_after: float = 5.0) -> ExecResult:
        subshell = f"(cd {shlex.quote(self._sandbox.workdir)} && eval {ansi_c_quote(command)})"
        result = self._shell.run(subshell, timeout, output_limit=output_limit)
        return ExecResult(result.exit_code, result.capture, result.timed_out)

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644) -> None:
        """As `Sandbox.put_files`: each {relative path: content} written under `directory`, parents created."""
        self._unpack(directory, tar_archive(files, mode), make_directory=True)

    def put_archive(self, directory: str, archive: bytes) -> None:
        """As `Sandbox.put_archive`."""
        self._unpack(directory, archive, make_directory=False)

    def _unpack(self, directory: str, archive: bytes, *, make_directory: bool) -> None:
        """`archive` unpacked under `directory` by the image's tar on the shell (a line on an open stream against about
        0.05 s for the engine's call with Docker); past `_SHELL_ARCHIVE_LIMIT` bytes, or where tar does not unpack it
        (no tar in the image, an entry tar will not replace), by the engine."""
        where = shlex.quote(directory)
        if len(archive) <= _SHELL_ARCHIVE_LIMIT:
            encoded = base64.b64encode(archive).decode()
            unpack = f"printf %s {encoded} | base64 -d | tar -x --same-owner --same-permissions -C {where}"
            if self._shell.run(f"mkdir -p -- {where} && {unpack}" if make_directory else unpack, 300).exit_code == 0:
                return
        if make_directory:
            self._shell.run(f"mkdir -p -- {where}", 300)
        self._sandbox.put_archive(directory, archive)

    def close(self) -> None:
        self._shell.close()
