"""What every runtime's sandbox does the same way once it can start a process (`Sandbox.open_exec`): run
one command to completion under a timeout (its output captured as text, or streamed as bytes), signal every
process of the container, and pack files as tar.
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Callable

import tenacity

from gymenvs.container.output import OutputCapture
from gymenvs.container.runtime.base import TIMEOUT_EXIT_CODES, ContainerGone, ExecResult, Sandbox, SandboxError

#: Seconds between two checks of a container's writable layer against its disk limit.
DISK_CHECK_INTERVAL = 1.0
# Every process of the container but its init (pid 1), its main process (the first child of init: the
# `sleep` that keeps the container up), this script and its `timeout` parent, and the pids in $keep.
# Stopped first, so a fork bomb cannot outrun the kill; builtins only, so it works with no pid to spare.
_KILL_ALL = r"""
read -ra children < /proc/1/task/1/children
main=${children[0]:-0}; for pid in "${children[@]}"; do ((pid < main)) && main=$pid; done
spare=" 1 $main $$ $PPID $keep "
for round in 1 2 3 4 5 6 7 8; do
  victims=()
  for dir in /proc/[0-9]*; do pid=${dir#/proc/}; [[ $spare == *" $pid "* ]] || victims+=("$pid"); done
  ((${#victims[@]})) || exit "$status"
  [ "$signal" = KILL ] && kill -s STOP "${victims[@]}" 2>/dev/null
  kill -s "$signal" "${victims[@]}" 2>/dev/null
  [ "$signal" = KILL ] || exit "$status"
done
exit "$status"
"""


class _NoPid(Exception):
    """The killer could not start: a fork bomb holds every process id."""


def kill_all_script(signal_name: str = "KILL", keep: tuple[int, ...] = (), exit_status: str = "0") -> str:
    """Bash (builtins only) that signals every process of the container but init, its main process, the
    shell running it and that shell's parent, and the pids in `keep`; it ends with `exit <exit_status>`
    (a number, or a shell expansion such as `"$code"` to pass on the status of what ran before it)."""
    return f"signal={signal_name} keep='{' '.join(map(str, keep))}' status={exit_status}\n{_KILL_ALL}"


def run_command(sandbox: Sandbox, command: str, *, timeout: float, output_limit: int = 1 << 20,
                kill_after: float = 5.0) -> ExecResult:
    """Run `command` with bash in `sandbox`, stopped by `timeout -k` inside the container and by a host
    watchdog; the container's disk is checked while it runs."""
    argv = ["timeout", "-k", f"{kill_after:g}", f"{timeout:g}", "bash", "-c", command]
    started = time.monotonic()
    stream = sandbox.open_exec(argv)
    output = OutputCapture(output_limit)
    deadline = started + timeout + kill_after + 10
    try:
        while True:
            data = stream.read(min(deadline, time.monotonic() + DISK_CHECK_INTERVAL))
            if data == b"" or (data is None and time.monotonic() >= deadline):
                break  # the end of the output, or the watchdog
            output.feed(data or b"")
            sandbox.check_disk()
        watchdog_fired = data is None
        exit_code = None if watchdog_fired else stream.exit_code()
    finally:
        stream.close()
    sandbox.check_disk(force=True)  # a command that wrote past the limit and ended before the next look
    seconds = time.monotonic() - started
    if exit_code is None and not watchdog_fired:
        sandbox.ensure_running()  # the stream ended without an exit code: was the container killed?
    timed_out = watchdog_fired or (exit_code in TIMEOUT_EXIT_CODES and seconds >= timeout)
    return ExecResult(exit_code, output, timed_out)


def stream_output(sandbox: Sandbox, command: str, on_output: Callable[[bytes], None], *, timeout: float,
                  kill_after: float = 5.0) -> int | None:
    """Run `command` with bash in `sandbox`, handing its standard output to `on_output` as it comes (bytes: a tar,
    not text to capture), its standard error dropped; its exit code (124 or 137: `timeout` stopped it), or None if
    the host watchdog fired. An exception of `on_output` closes the stream and goes through."""
    argv = ["timeout", "-k", f"{kill_after:g}", f"{timeout:g}", "bash", "-c", f"{{ {command}\n}} 2>/dev/null"]
    stream = sandbox.open_exec(argv)
    deadline = time.monotonic() + timeout + kill_after + 10
    try:
        while data := stream.read(deadline):
            on_output(data)
        return None if data is None else stream.exit_code()
    finally:
        stream.close()


def kill_all(sandbox: Sandbox, signal_name: str = "KILL", *, keep: tuple[int, ...] = (), attempts: int = 20) -> None:
    """Signal every process of the container but its init and main process and the pids in `keep`: jobs
    that double-forked away from their shell and fork-bomb children included. The killer is a single bash
    process (no `timeout` around it), retried while a fork bomb holds every pid."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_incrementing(start=0.05, increment=0.05),  # no pid free for the killer: a fork bomb
        retry=tenacity.retry_if_result(lambda exit_code: exit_code != 0) | tenacity.retry_if_exception_type(_NoPid),
        retry_error_callback=lambda _: None,
    )
    if retrying(_run_killer, sandbox, kill_all_script(signal_name, keep)) != 0:
        raise SandboxError(f"could not stop the processes of container {sandbox.name}: it is out of process ids")


def _run_killer(sandbox: Sandbox, script: str) -> int | None:
    """The killer's exit code; `_NoPid` when it could not even start (`ContainerGone` goes through)."""
    try:
        stream = sandbox.open_exec(["bash", "-c", script])
    except ContainerGone:
        raise
    except SandboxError:
        raise _NoPid() from None
    try:
        deadline = time.monotonic() + 20
        while stream.read(deadline):
            pass
        return stream.exit_code()
    finally:
        stream.close()


def tar_archive(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """An uncompressed tar of {path: content}, stamped now (a stale mtime could keep stale .pyc files)."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()


def entries_archive(entries: list[tuple[str, str, str | bytes]]) -> bytes:
    """A tar of (path, kind, payload) entries, kind "dir" (payload ignored), "symlink" (payload: its
    target) or "file" (payload: its bytes, mode 0644), owned by root and stamped now."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name.lstrip("/"))
            info.mtime, info.uid, info.gid = int(time.time()), 0, 0
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(payload)
                tar.addfile(info)
            else:
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()
