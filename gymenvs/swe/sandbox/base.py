"""What a sandbox is, whatever runs it: the `Sandbox` protocol and the types every backend shares.

A sandbox is one isolated machine that an episode (or one grading run) owns from start to close:

- **start**: constructing a backend's sandbox starts it (`DockerSandbox(client, image, role=...,
  episode_id=..., limits=...)`); when the constructor returns, commands can run;
- **exec**: `run` (one command to completion, with a timeout) and `open_exec` (a long-lived process
  whose stdin and output the caller drives: the persistent shell);
- **copy in**: `put_files`, `put_archive`; **copy out**: `read_file`, `fetch`;
- **diff**: `changed_paths`, what the sandbox changed under a directory, as the runtime (not a
  process inside) sees it;
- **snapshot**: `snapshot`, the sandbox's file system kept as an image a later sandbox can start from;
- **close**: `remove`, idempotent; `ensure_running`, `check_disk` and `kill_all` police it meanwhile.

Docker (`gymenvs.swe.sandbox.docker`) is the only backend today. The next backend (Podman, a
Kubernetes pod, a remote runtime) is one new module beside it that implements this protocol with
the same `Limits` and the same errors; the pool, the shell, grading and both envs take any
`Sandbox`. Nothing here imports a runtime's SDK.
"""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from gymenvs.core.outcomes import InfraError
from gymenvs.swe.sandbox.output import OutputCapture

#: Exit codes that mean `timeout` stopped the command (124) or had to SIGKILL it (137).
TIMEOUT_EXIT_CODES = (124, 137)
#: Docker's size syntax, as configs accept it: digits and an optional unit ("512m", "10g", "2048").
SIZE_PATTERN = r"^[0-9]+[bkmgBKMG]?$"
_SIZE = re.compile(SIZE_PATTERN)


def parse_size(size: str | int) -> int:
    """Bytes in Docker's size syntax ("512m", "10g", "2048" bytes); `ValueError` naming what is allowed."""
    if isinstance(size, int):
        return size
    if not _SIZE.match(size):
        raise ValueError(f"size {size!r}: use digits and an optional unit b, k, m or g (e.g. '512m', '10g')")
    from docker.utils import parse_bytes

    return int(parse_bytes(size))


class SandboxError(InfraError):
    """The sandbox cannot do what was asked (no engine, no image, a failed runtime call)."""

    #: The `outcome_reason` of an episode this error ends (`gymenvs.core.outcomes`; always infra).
    reason = "engine_error"


class ImageMissing(SandboxError):
    """The image is not present locally and was not (or could not be) pulled."""

    reason = "image_missing"


class ContainerGone(SandboxError):
    """The container stopped or vanished while in use (killed from outside, out of memory...)."""

    reason = "container_died"


class ContainerPaused(ContainerGone):
    """The container was paused (frozen) from outside: the engine refuses to run anything in it."""

    reason = "container_paused"


class OutOfMemory(ContainerGone):
    """The engine killed the container for exceeding its memory limit."""

    reason = "oom_killed"


class DiskLimitExceeded(SandboxError):
    """The container wrote more than its disk limit: its episode must stop."""

    reason = "disk_limit"


@dataclass(frozen=True)
class Limits:
    """Resources one container may use."""

    mem_limit: str = "2g"
    cpus: float = 1.0
    pids_limit: int = 512
    network: bool = False
    #: The container's main process is `sleep <lifetime>`: a leaked container dies by itself.
    lifetime_seconds: int = 24 * 3600
    #: Bytes the container's writable layer may hold (None: no limit). Capped by the engine where its
    #: storage driver supports it, else watched while commands run (`Sandbox.check_disk`).
    disk_limit: int | None = 10 << 30


@dataclass
class ExecResult:
    exit_code: int | None
    output: OutputCapture
    timed_out: bool


class ExecProcess(Protocol):
    """A process started in a sandbox: write its stdin, read its merged output with a deadline."""

    #: Whether the process has closed its output (set by `read` and `closed`).
    eof: bool

    def send(self, data: bytes) -> None: ...

    def read(self, deadline: float) -> bytes | None:
        """The next output bytes; `b""` once the process closed its output; `None` at the deadline."""
        ...

    def closed(self) -> bool: ...

    def exit_code(self) -> int | None: ...

    def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """One running sandbox from `image`, owned by one episode or grading run (see the module docstring)."""

    id: str
    name: str
    image: str
    workdir: str
    limits: Limits
    #: The runtime's client the sandbox was started with; a sandbox started beside this one uses it.
    client: Any

    def run(self, command: str, *, timeout: float, output_limit: int = 1 << 20, kill_after: float = 5.0) -> ExecResult: ...

    def open_exec(self, command: list[str], *, stdin: bool = False,
                  environment: dict[str, str] | None = None) -> ExecProcess: ...

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644) -> None: ...

    def put_archive(self, directory: str, archive: bytes) -> None: ...

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, int]: ...

    def fetch(self, path: str) -> tuple[tarfile.TarInfo, bytes] | None: ...

    def changed_paths(self, under: str) -> dict[str, str]: ...

    def snapshot(self, repository: str, tag: str = "latest") -> str: ...

    def check_disk(self, *, force: bool = False) -> None: ...

    def kill_all(self, signal_name: str = "KILL", *, keep: tuple[int, ...] = (), attempts: int = 20) -> None: ...

    def ensure_running(self) -> None: ...

    def remove(self) -> None: ...
