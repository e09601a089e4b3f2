"""What a container runtime is, whatever engine runs it: the `Runtime` and `Sandbox` protocols and the
types and errors every backend shares.

A **runtime** is one container engine (a Docker or a Podman engine, local or remote). It does
every engine operation the container envs need, and nothing else in gymenvs touches an engine's API:

- **sandboxes**: `start` one (or `create` one that is not started, to read an image's files);
- **images**: `image_exists`, `pull`, `image_config`, `build`, `import_image`, `remove_image`, `prune_images`;
- **volumes**: `create_volume`, `remove_volume`, `volume_directory` (where this process can reach one directly);
- **sidecars**: `start_sidecars` (a compose project's services other than the agent's, on a private network the
  agent's sandbox then joins through `Limits.network_name`);
- **ownership**: everything it creates carries gymenvs' labels and its owner's (`owners.owner_labels`);
  `reap` removes what the owners that are gone left behind.

A **sandbox** is one isolated machine that an episode (or one grading run) owns from start to removal:

- **exec**: `run` (one command to completion, with a timeout) and `open_exec` (a long-lived process
  whose stdin and output the caller drives: the persistent shell, the agent);
- **files**: `put_files` / `put_archive` in, `read_file` / `fetch` / `read_archive` out, `stat` one
  path, `changed_paths` (what the sandbox changed, as the runtime, not a process inside, sees it) and `changes_archive`,
  `listens_on_tcp`;
- **network**: `loopback_listener` (a socket of this process on the sandbox's loopback, where the runtime can make
  one);
- **lifecycle**: `pause` (freeze every process), `stop` (kill every process), `commit` (the file system
  as an image a later sandbox starts from), `remove` (idempotent); `ensure_running`, `check_disk` and
  `kill_all` police it meanwhile.

A new runtime is one package beside `docker/` implementing both protocols with the same `Limits` and
the same errors. Nothing here imports an engine's SDK.
"""

from __future__ import annotations

import re
import socket
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from gymenvs.container.output import OutputCapture
from gymenvs.core.outcomes import InfraError

#: Exit codes that mean `timeout` stopped the command (124) or had to SIGKILL it (137).
TIMEOUT_EXIT_CODES = (124, 137)
#: The size syntax of every size option: digits and an optional unit ("512m", "10g", "2048").
SIZE_PATTERN = r"^[0-9]+[bkmgBKMG]?$"
_SIZE = re.compile(SIZE_PATTERN)
_UNITS = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(size: str | int) -> int:
    """Bytes of a size ("512m", "10g", "2048" bytes); `ValueError` naming what is allowed."""
    if isinstance(size, int):
        return size
    if not _SIZE.match(size):
        raise ValueError(f"size {size!r}: use digits and an optional unit b, k, m or g (e.g. '512m', '10g')")
    unit = size[-1].lower()
    return int(size[:-1]) * _UNITS[unit] if unit in _UNITS else int(size)


class SandboxError(InfraError):
    """The runtime cannot do what was asked (no engine, no image, a failed engine call)."""

    #: The `outcome_reason` of an episode this error ends (`gymenvs.core.outcomes`; always infra).
    reason = "engine_error"


class ImageMissing(SandboxError):
    """The image is not present locally and was not (or could not be) pulled."""

    reason = "image_missing"


class ImageBuildError(RuntimeError):
    """An image could not be built."""


class ContainerGone(SandboxError):
    """The container stopped or vanished while in use (killed from outside, out of memory...)."""

    reason = "container_died"


class ContainerPaused(ContainerGone):
    """The container was paused (frozen) from outside: the engine refuses to run anything in it."""

    reason = "container_paused"


class OutOfMemory(ContainerGone):
    """The engine killed the container for exceeding its memory limit."""

    reason = "oom_killed"


class LimitsNotEnforced(SandboxError):
    """The runtime cannot enforce a resource limit asked of a container (`Runtime.unenforced`), and the limits do not
    say to run without it (`Limits.unenforced_limits`)."""


class DiskLimitExceeded(SandboxError):
    """The container wrote more than its disk limit: its episode must stop."""

    reason = "disk_limit"


#: What a container started with limits its runtime cannot enforce does: "refuse" (`LimitsNotEnforced`) or "run_without"
#: them (the runtime's `unenforced` says which, and why).
UnenforcedLimits = Literal["refuse", "run_without"]
#: The resource limits of `Limits` that an engine may be unable to enforce (rootless Podman on cgroup v1: all three).
RESOURCE_LIMITS = ("mem_limit", "cpus", "pids_limit")


@dataclass(frozen=True)
class Limits:
    """Resources one container may use. None: no limit of that resource."""

    mem_limit: str | None = "2g"
    cpus: float | None = 1.0
    pids_limit: int | None = 512
    network: bool = False
    #: The container's main process is `sleep <lifetime>`: a leaked container dies by itself.
    lifetime_seconds: int = 24 * 3600
    #: Bytes the container's writable layer may hold (None: no limit). Capped by the engine where its
    #: storage driver supports it, else watched while commands run (`Sandbox.check_disk`).
    disk_limit: int | None = 10 << 30
    #: Join this network (the private network of an episode's sidecars: `Runtime.start_sidecars`) under the
    #: alias "main", instead of the default one; `network` is then not used (the network says whether it
    #: reaches outside).
    network_name: str | None = None
    #: With `network`: reach only these (IP addresses, CIDR ranges, and host names resolved on the host when the
    #: container starts, and pinned in its /etc/hosts); () reaches nothing outside. None: no such restriction.
    allowed_hosts: tuple[str, ...] | None = None
    #: What a runtime that cannot enforce some of `RESOURCE_LIMITS` does with a container asking them.
    unenforced_limits: UnenforcedLimits = "refuse"


def enforceable(limits: Limits, unenforced: Mapping[str, str], runtime: str) -> Limits:
    """`limits` as a runtime that cannot enforce `unenforced` (limit -> why) gives them: unchanged where it can,
    without those it cannot where `limits.unenforced_limits` says to run without them; else `LimitsNotEnforced`."""
    asked = {name: getattr(limits, name) for name in RESOURCE_LIMITS if name in unenforced and getattr(limits, name) is not None}
    if not asked:
        return limits
    if limits.unenforced_limits == "run_without":
        without: dict[str, Any] = dict.fromkeys(asked)
        return replace(limits, **without)
    why = "; ".join(dict.fromkeys(unenforced[name] for name in asked))
    named = ", ".join(f"{name}={value!r}" for name, value in asked.items())
    raise LimitsNotEnforced(f"runtime {runtime!r} cannot enforce {named}: {why}. Its containers would run without them: "
                            "pass unenforced_limits='run_without' to run them so, knowingly, or use an engine that "
                            "enforces them (Docker, rootful Podman)")


@dataclass
class ExecResult:
    exit_code: int | None
    output: OutputCapture
    timed_out: bool


@dataclass(frozen=True)
class PathStat:
    """One path of a sandbox as the runtime sees it (the last component is not followed)."""

    kind: Literal["dir", "symlink", "file", "other"]
    size: int
    link_target: str = ""


@dataclass(frozen=True)
class ImageConfig:
    """What an image sets for the containers started from it."""

    id: str
    workdir: str
    environment: Mapping[str, str]


ChangeKind = Literal["changed", "added", "deleted"]


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
    """One container from `image`, owned by one episode or grading run (see the module docstring)."""

    id: str
    name: str
    image: str
    workdir: str
    limits: Limits

    @property
    def runtime(self) -> Runtime:
        """The runtime that started it; a sandbox started beside this one uses the same."""
        ...

    def run(self, command: str, *, timeout: float, output_limit: int = 1 << 20, kill_after: float = 5.0) -> ExecResult: ...

    def open_exec(self, command: list[str], *, stdin: bool = False,
                  environment: dict[str, str] | None = None) -> ExecProcess: ...

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644) -> None: ...

    def put_archive(self, directory: str, archive: bytes) -> None: ...

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, int]: ...

    def fetch(self, path: str) -> tuple[tarfile.TarInfo, bytes] | None: ...

    def read_archive(self, path: str) -> bytes: ...

    def stat(self, path: str) -> PathStat | None: ...

    def changed_paths(self, under: str) -> dict[str, ChangeKind]: ...

    def changes_archive(self, paths: Sequence[str], limit: int) -> bytes | None:
        """A tar of `paths` (what `changed_paths` listed as added or changed, or other files the sandbox wrote) as the
        sandbox's writable layer holds them, each entry alone, owners by number, for another sandbox's `put_archive` or
        to read; None where the runtime cannot read its layer so, a path is not in it, or past `limit` bytes of files
        (a snapshot, `commit`, carries them instead, or the engine reads them)."""
        ...

    def reads_layer(self) -> bool:
        """Whether `changes_archive` can read the sandbox's writable layer (else it answers None)."""
        ...

    def listens_on_tcp(self) -> bool | None:
        """Whether a process of the running sandbox listens on a TCP port, read without running anything in it; None
        where the runtime cannot read that so (its engine on another host, say): ask a process inside instead."""
        ...

    def loopback_listener(self) -> socket.socket | None:
        """A TCP socket of this process listening on the running sandbox's own loopback (127.0.0.1, a free port): a
        program in the sandbox connects to it as to a server of its own, with no relay between them. None where the
        runtime cannot make one so (its engine on another host, no permission): relay through a process inside
        instead (`open_exec`). The caller closes it."""
        ...

    def pause(self) -> None: ...

    def stop(self) -> None: ...

    def commit(self, repository: str, tag: str, *, labels: Mapping[str, str] | None = None, role: str = "snapshot") -> str:
        """The sandbox's files as an image; its id. In the role "snapshot" it is this process's (reaped once the
        process is gone); in another role ("episode": kept for re-grading) it outlives the process."""
        ...

    def check_disk(self, *, force: bool = False) -> None: ...

    def kill_all(self, signal_name: str = "KILL", *, keep: tuple[int, ...] = (), attempts: int = 20) -> None: ...

    def ensure_running(self) -> None: ...

    def remove(self) -> None: ...


class Sidecars(Protocol):
    """The services of a compose project started beside an episode's sandbox, on their own private network."""

    #: The network they share: a sandbox joins it through `Limits.network_name`.
    network: str
    #: Their containers' names.
    names: list[str]

    def remove(self) -> None:
        """Remove their containers and their network (idempotent)."""
        ...


@runtime_checkable
class Runtime(Protocol):
    """One container engine, doing every engine operation (see the module docstring)."""

    #: "docker", "podman": what `info` and errors call it, and its name in `RUNTIMES`.
    name: str
    #: What it cannot do: requirement (`gymenvs.container.runtime.requirements`) -> why.
    lacks: ClassVar[Mapping[str, str]]
    #: The resource limits (`RESOURCE_LIMITS`) its containers would not get -> why, as its engine says (rootless Podman
    #: on cgroup v1: all). A start asking one is refused, or runs without it, as `Limits.unenforced_limits` says.
    unenforced: Mapping[str, str]

    def info(self) -> dict[str, Any]:
        """What it is, for a user to see (`info["runtime"]` of a container env's reset): its name, its engine's URL,
        `unenforced`, and what else its engine says of itself (Podman: rootless, cgroup version)."""
        ...

    def start(self, image: str, *, role: str, episode_id: str, limits: Limits = Limits(), workdir: str = "/",
              labels: Mapping[str, str] | None = None, volumes: Mapping[str, str] | None = None,
              network_of: Sandbox | None = None) -> Sandbox:
        """A started sandbox of `image`: `volumes` maps volume names (`create_volume`) to where they are mounted
        (nothing of this host is: the engine need not share its files). With `network_of`, it joins
        that sandbox's network namespace (its loopback and interfaces; `limits.network` is then not used)
        and shares nothing else with it. With `limits.allowed_hosts`, it reaches only those (`SandboxError` where
        the runtime cannot enforce it). Resource limits it cannot enforce (`unenforced`) are refused
        (`LimitsNotEnforced`) or left out (`Limits.unenforced_limits`; the sandbox's `limits` say what it got)."""
        ...

    def create(self, image: str, *, role: str) -> Sandbox:
        """A sandbox of `image` that is not started: its files can be read, nothing runs in it."""
        ...

    def image_exists(self, name: str) -> bool: ...

    def pull(self, name: str) -> None: ...

    def tag(self, name: str, new_name: str) -> None:
        """Give the local image `name` the name `new_name` too (`ImageMissing` if `name` is not present)."""
        ...

    def push(self, name: str) -> None:
        """Push the local image `name` to the registry its name starts with; `ImageBuildError` saying why it failed."""
        ...

    def image_config(self, name: str) -> ImageConfig: ...

    def build(self, context: bytes | Path, tag: str, *, dockerfile: str = "Dockerfile",
              labels: Mapping[str, str] | None = None, timeout: float | None = None, network: bool = True,
              on_output: Callable[[str], None] | None = None) -> str:
        """Build the image `tag` from a build context (a tar, or a folder honouring its .dockerignore), pulling
        nothing; its id. `ImageBuildError` with the end of the build's output if it fails or outlives `timeout`
        seconds (then the build is cancelled)."""
        ...

    def import_image(self, chunks: Iterable[bytes], repository: str, tag: str, changes: list[str]) -> None:
        """An image from a tarred root file system, read as `chunks`, with Dockerfile `changes` (ENV, WORKDIR...)."""
        ...

    def remove_image(self, name: str) -> None:
        """Remove the image if it can be (best effort: what is in use stays, labelled for a later `reap`)."""
        ...

    def prune_images(self, label: str) -> None:
        """Remove the dangling images that carry `label` (the stages of a build)."""
        ...

    def create_volume(self, name: str, *, role: str) -> str: ...

    def volume_directory(self, name: str) -> str | None:
        """The volume's directory on this host, if this process may read and write it there as the owner its
        sandboxes' root is (a local engine, no user namespace between them); None otherwise: a sandbox's file
        operations (`put_archive`, `read_file`) reach it instead, at an engine call each."""
        ...

    def remove_volume(self, name: str) -> None:
        """Remove the volume if it can be (best effort, as `remove_image`)."""
        ...

    def start_sidecars(self, files: Sequence[Path], *, project_directory: Path, images: Mapping[str, str],
                       wait_for: Mapping[str, str], episode_id: str, network: bool, volumes: Sequence[str] = (),
                       timeout: float = 120.0) -> Sidecars:
        """Start the compose project's services named in `images` (each with the image given, already present)
        on a new private network, the network and the project's named `volumes` labelled as this process's
        (`network`: whether it reaches outside), then wait
        up to `timeout` seconds for each of `wait_for` to meet its compose condition ("service_started",
        "service_healthy", "service_completed_successfully"); `SandboxError` saying which did not."""
        ...

    def reap(self, orphaned: Callable[[Mapping[str, str]], bool]) -> list[str]:
        """Remove this host's gymenvs containers, snapshot images, volumes and networks whose labels `orphaned`
        judges left behind; their names."""
        ...

    def close(self) -> None: ...
