"""The Docker backend of `Sandbox` (the protocol in `base`): one labelled, resource-limited, hardened
container per episode (or per grading run).

Built on the `docker` SDK. Every container carries labels naming gymenvs, its role, its episode
and the process that owns it (host, pid, process start time), so that:

- `DockerSandbox.remove()` (called by `close()`), a `weakref.finalize` and therefore `atexit` remove it;
- `reap_orphans()` removes, at the next start, containers whose owning process is gone (killed by
  SIGKILL, say) and never one that a live process still uses;
- a SIGTERM (what Slurm and Kubernetes send) removes this process's containers before it dies.

Containers keep only the capabilities a root user editing files and running tests needs (no raw
sockets, no mknod), run with `no-new-privileges`, and have their writable layer watched against a
disk limit (the engine's `storage_opt size` where it supports it).

The docker SDK's `exec_run` has no timeout, so commands go through `ExecStream`: the raw exec
socket read with a deadline (the host-side watchdog), while an in-container `timeout -k` stops
the process itself.
"""

from __future__ import annotations

import io
import os
import select
import signal
import socket
import struct
import tarfile
import threading
import time
import uuid
import weakref
from functools import cache
from typing import Any

import tenacity

from gymenvs.swe.sandbox.base import (
    TIMEOUT_EXIT_CODES,
    ContainerGone,
    ContainerPaused,
    DiskLimitExceeded,
    ExecResult,
    ImageMissing,
    Limits,
    OutOfMemory,
    SandboxError,
)
from gymenvs.swe.sandbox.output import OutputCapture

LABEL = "gymenvs.swe"
LABEL_ROLE = "gymenvs.swe.role"
LABEL_EPISODE = "gymenvs.swe.episode"
LABEL_HOST = "gymenvs.swe.owner.host"
LABEL_PID = "gymenvs.swe.owner.pid"
LABEL_START = "gymenvs.swe.owner.start"
#: Capabilities a container keeps (Docker's defaults minus NET_RAW, MKNOD, SETFCAP, SETPCAP, SYS_CHROOT
#: and AUDIT_WRITE). DAC_OVERRIDE stays so root can still reach a bind-mounted unix socket it does not own.
KEPT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE")
SECURITY_OPTIONS = ("no-new-privileges:true",)
#: Seconds between two checks of a container's writable layer against its disk limit.
DISK_CHECK_INTERVAL = 1.0
_FRAME_HEADER = struct.Struct(">BxxxL")
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


def kill_all_script(signal_name: str = "KILL", keep: tuple[int, ...] = (), exit_status: str = "0") -> str:
    """Bash (builtins only) that signals every process of the container but init, its main process, the
    shell running it and that shell's parent, and the pids in `keep`; it ends with `exit <exit_status>`
    (a number, or a shell expansion such as `"$code"` to pass on the status of what ran before it)."""
    return f"signal={signal_name} keep='{' '.join(map(str, keep))}' status={exit_status}\n{_KILL_ALL}"


def docker_client(timeout: int = 600):
    """A docker SDK client for the engine the environment points at (DOCKER_HOST or the local socket)."""
    try:
        import docker
    except ImportError as exc:
        raise ImportError("the SWE environment needs the docker SDK: pip install 'gymenvs[swe]'") from exc
    try:
        client = docker.from_env(timeout=timeout, max_pool_size=32)
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(f"no Docker engine answers ({exc}); start one (e.g. `dockerd`) or set DOCKER_HOST") from None
    return client


_shared_clients: dict[int, Any] = {}
_shared_lock = threading.Lock()


def shared_client() -> Any:
    """This process's docker client, created (and the engine pinged) on first use and shared by its
    envs, pools and threads (the SDK's connection pool is thread-safe). A forked child gets its own."""
    with _shared_lock:
        if os.getpid() not in _shared_clients:
            _shared_clients[os.getpid()] = docker_client()
        return _shared_clients[os.getpid()]


class ExecStream:
    """A process started with `docker exec`: write its stdin, read its merged stdout/stderr with a deadline."""

    def __init__(self, api: Any, container_id: str, command: list[str], *, stdin: bool = False,
                 environment: dict[str, str] | None = None, workdir: str | None = None):
        self._api = api
        self.exec_id = api.exec_create(container_id, command, stdin=stdin, stdout=True, stderr=True,
                                       environment=environment, workdir=workdir)["Id"]
        self._raw = api.exec_start(self.exec_id, socket=True)  # holds the HTTP response alive
        self._sock: socket.socket = getattr(self._raw, "_sock", self._raw)
        self._buffer = bytearray()
        self._frame_left = 0
        self.eof = False

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            self.eof = True

    def read(self, deadline: float) -> bytes | None:
        """The next output bytes; `b""` once the process has closed its output; `None` at the deadline."""
        while True:
            data = self._take_payload()
            if data or self.eof:
                return data
            chunk = self._recv(deadline)
            if chunk is None:
                return None
            if chunk:
                self._buffer += chunk
            else:
                self.eof = True

    def closed(self) -> bool:
        """Whether the process has closed its output (it exited, or its container stopped); never blocks."""
        if not self.eof and select.select([self._sock], [], [], 0)[0]:
            chunk = self._recv(time.monotonic())
            if chunk:
                self._buffer += chunk
            else:
                self.eof = True
        return self.eof

    def exit_code(self) -> int | None:
        """The process's exit code, or None while it runs."""
        try:
            return self._api.exec_inspect(self.exec_id)["ExitCode"]
        except Exception:  # the container is gone: there is no exit code to read
            return None

    def close(self) -> None:
        for closable in (self._sock, self._raw):
            try:
                closable.close()
            except OSError:
                pass

    def _recv(self, deadline: float) -> bytes | None:
        pending = getattr(self._sock, "pending", None)  # TLS sockets buffer data select() cannot see
        if not (pending and pending()):
            ready, _, _ = select.select([self._sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
        try:
            return self._sock.recv(1 << 16)
        except OSError:  # reset by the engine: the stream is over
            return b""

    def _take_payload(self) -> bytes:
        """Strip Docker's 8-byte stream headers (the exec runs without a TTY) from the buffered bytes."""
        payload = bytearray()
        while self._buffer:
            if self._frame_left == 0:
                if len(self._buffer) < _FRAME_HEADER.size:
                    break
                _, self._frame_left = _FRAME_HEADER.unpack_from(self._buffer)
                del self._buffer[: _FRAME_HEADER.size]
                continue
            size = min(self._frame_left, len(self._buffer))
            payload += self._buffer[:size]
            del self._buffer[:size]
            self._frame_left -= size
        return bytes(payload)


class _NoPid(Exception):
    """The killer could not start: a fork bomb holds every process id."""


def _container_options(role: str, episode_id: str, limits: Limits, workdir: str,
                       read_only_binds: dict[str, str] | None, labels: dict[str, str] | None,
                       mounts: list[Any] | None = None) -> dict[str, Any]:
    """The `containers.create` keywords of a sandbox: its limits, its labels, its read-only binds and its mounts."""
    return dict(
        command=["sleep", str(limits.lifetime_seconds)],
        name=f"gymenvs-swe-{role}-{uuid.uuid4().hex[:12]}",
        labels={**(labels or {}), LABEL: "1", LABEL_ROLE: role, LABEL_EPISODE: episode_id, **owner_labels()},
        working_dir=workdir,
        init=True,
        network_mode="none" if not limits.network else None,
        mem_limit=limits.mem_limit,
        memswap_limit=limits.mem_limit,
        nano_cpus=int(limits.cpus * 1e9),
        pids_limit=limits.pids_limit,
        cap_drop=["ALL"],
        cap_add=list(KEPT_CAPABILITIES),
        security_opt=list(SECURITY_OPTIONS),
        volumes={host: {"bind": inside, "mode": "ro"} for host, inside in (read_only_binds or {}).items()},
        mounts=list(mounts or []),
    )


class DockerSandbox:
    """The Docker `Sandbox`: one running container from `image`, labelled with its owner and removed when no longer needed."""

    def __init__(self, client: Any, image: str, *, role: str, episode_id: str, limits: Limits = Limits(),
                 workdir: str = "/testbed", read_only_binds: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None, mounts: list[Any] | None = None):
        """`read_only_binds` maps host directories to where the container sees them, read-only;
        `labels` are added to the ownership labels; `mounts` are `docker.types.Mount`s (a fresh volume, say)."""
        install_sigterm_cleanup()
        self.client = client
        self.image = image
        self.workdir = workdir
        self.limits = limits
        options = _container_options(role, episode_id, limits, workdir, read_only_binds, labels, mounts)
        container = self._create_explained(image, options)
        self.id: str = container.id
        self.name: str = container.name
        self._finalizer = weakref.finalize(self, _remove_container, client.api, self.id)
        self._next_disk_check = 0.0
        self._disk_exceeded = ""
        self._start(container)

    def _create_explained(self, image: str, options: dict[str, Any]) -> Any:
        """`_create`, with the engine's errors as `SandboxError`s that say what went wrong."""
        import docker

        try:
            return self._create(image, options)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"image {image!r} is not present locally") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not create a container from {image!r}: {exc.explanation or exc}") from None

    def _start(self, container: Any) -> None:
        """Start the created container; one that cannot start is removed."""
        import docker

        try:
            container.start()
        except docker.errors.APIError as exc:
            self.remove()
            raise SandboxError(f"could not start a container from {self.image!r}: {exc.explanation or exc}") from None

    def _create(self, image: str, options: dict[str, Any]) -> Any:
        """Create the container, with the engine capping its writable layer when the storage driver can."""
        import docker

        self.disk_capped = False
        engine = self.client.api.base_url
        if self.limits.disk_limit and _STORAGE_OPT_SUPPORTED.get(engine, True):
            try:
                container = self.client.containers.create(image, storage_opt={"size": str(self.limits.disk_limit)}, **options)
            except docker.errors.APIError as exc:
                if "storage-opt" not in str(exc) and "storage opt" not in str(exc):
                    raise
                _STORAGE_OPT_SUPPORTED[engine] = False  # e.g. overlay2 not on xfs with pquota: watch instead
            else:
                self.disk_capped = True
                return container
        return self.client.containers.create(image, **options)

    def open_exec(self, command: list[str], *, stdin: bool = False, environment: dict[str, str] | None = None) -> ExecStream:
        try:
            return ExecStream(self.client.api, self.id, command, stdin=stdin, environment=environment, workdir=self.workdir)
        except Exception as exc:
            raise self._failure("could not start a process", exc) from None

    def run(self, command: str, *, timeout: float, output_limit: int = 1 << 20, kill_after: float = 5.0) -> ExecResult:
        """Run `command` with bash, stopped by `timeout -k` inside the container and by a host watchdog."""
        argv = ["timeout", "-k", f"{kill_after:g}", f"{timeout:g}", "bash", "-c", command]
        started = time.monotonic()
        stream = self.open_exec(argv)
        output = OutputCapture(output_limit)
        deadline = started + timeout + kill_after + 10
        try:
            while True:
                data = stream.read(min(deadline, time.monotonic() + DISK_CHECK_INTERVAL))
                if data == b"" or (data is None and time.monotonic() >= deadline):
                    break  # the end of the output, or the watchdog
                output.feed(data or b"")
                self.check_disk()
            watchdog_fired = data is None
            exit_code = None if watchdog_fired else stream.exit_code()
        finally:
            stream.close()
        self.check_disk(force=True)  # a command that wrote past the limit and ended before the next look
        seconds = time.monotonic() - started
        if exit_code is None and not watchdog_fired:
            self.ensure_running()  # the stream ended without an exit code: was the container killed?
        timed_out = watchdog_fired or (exit_code in TIMEOUT_EXIT_CODES and seconds >= timeout)
        return ExecResult(exit_code, output, timed_out)

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Write each {relative path: content} under `directory` of the container (which must exist)."""
        self.put_archive(directory, tar_archive(files, mode))

    def put_archive(self, directory: str, archive: bytes) -> None:
        """Unpack the tar `archive` under `directory` of the container (which must exist)."""
        try:
            ok = self.client.api.put_archive(self.id, directory, archive)
        except Exception as exc:
            raise self._failure(f"could not write to {directory}", exc) from None
        if not ok:
            raise SandboxError(f"could not write to {directory}")

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, int]:
        """The content and mode of the regular file at `path`; `FileNotFoundError` or `ValueError` otherwise."""
        import docker

        try:
            chunks, stat = self.client.api.get_archive(self.id, path)
        except docker.errors.NotFound:
            self.ensure_running()
            raise FileNotFoundError(path) from None
        except Exception as exc:
            raise self._failure(f"could not read {path}", exc) from None
        if stat.get("size", 0) > max_bytes:
            raise ValueError(f"{path} has {stat['size']} bytes, more than the {max_bytes} this tool reads")
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise ValueError(f"{path} is not a regular file")
            return _member_bytes(tar, member), member.mode

    def check_disk(self, *, force: bool = False) -> None:
        """`DiskLimitExceeded` if the writable layer outgrew the disk limit (checked at most once per
        `DISK_CHECK_INTERVAL` unless `force`; a no-op where the engine caps the layer itself)."""
        if not self.limits.disk_limit or self.disk_capped:
            return
        if self._disk_exceeded:  # sticky: the episode is over
            raise DiskLimitExceeded(self._disk_exceeded)
        now = time.monotonic()
        if not force and now < self._next_disk_check:
            return
        self._next_disk_check = now + DISK_CHECK_INTERVAL
        try:
            (found,) = self.client.api.containers(all=True, size=True, filters={"id": self.id})
            used = found.get("SizeRw") or 0
        except Exception:  # gone or unreachable: the next Docker call says which
            return
        if used > self.limits.disk_limit:
            self._disk_exceeded = (f"the container wrote {used / 2**20:.0f} MiB, more than its disk limit of "
                                   f"{self.limits.disk_limit / 2**20:.0f} MiB: the episode was stopped")
            raise DiskLimitExceeded(self._disk_exceeded)

    def kill_all(self, signal_name: str = "KILL", *, keep: tuple[int, ...] = (), attempts: int = 20) -> None:
        """Signal every process of the container but its init and main process and the pids in `keep`:
        jobs that double-forked away from their shell and fork-bomb children included. The killer is a
        single bash process (no `timeout` around it), retried while a fork bomb holds every pid."""
        script = kill_all_script(signal_name, keep)
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_incrementing(start=0.05, increment=0.05),  # no pid free for the killer: a fork bomb
            retry=tenacity.retry_if_result(lambda exit_code: exit_code != 0) | tenacity.retry_if_exception_type(_NoPid),
            retry_error_callback=lambda _: None,
        )
        if retrying(self._run_killer, script) != 0:
            raise SandboxError(f"could not stop the processes of container {self.name}: it is out of process ids")

    def _run_killer(self, script: str) -> int | None:
        """The killer's exit code; `_NoPid` when it could not even start (`ContainerGone` goes through)."""
        try:
            stream = self.open_exec(["bash", "-c", script])
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

    def snapshot(self, repository: str, tag: str = "latest") -> str:
        """Commit the container's file system as the image `repository:tag`; return the image id. A sandbox
        started from it begins where this one stands (the processes are not kept, only the files)."""
        try:
            return self.client.api.commit(self.id, repository=repository, tag=tag, pause=True)["Id"]
        except Exception as exc:
            raise self._failure(f"could not snapshot as {repository}:{tag}", exc) from None

    def changed_paths(self, under: str) -> dict[str, str]:
        """What the container changed under `under`, as the engine sees its writable layer (no process in
        the container is asked): {absolute path: "changed" | "added" | "deleted"}."""
        try:
            changes = self.client.api.diff(self.id) or []
        except Exception as exc:
            raise self._failure("could not list the changed files", exc) from None
        prefix = under.rstrip("/") + "/"
        return {c["Path"]: _CHANGE_KINDS[c["Kind"]] for c in changes if c["Path"].startswith(prefix)}

    def fetch(self, path: str) -> tuple[tarfile.TarInfo, bytes] | None:
        """The file or symbolic link at `path` read by the engine: (tar header, content), or None if absent."""
        import docker

        try:
            chunks, _ = self.client.api.get_archive(self.id, path)
            data = b"".join(chunks)
        except docker.errors.NotFound:
            return None
        except Exception as exc:
            raise self._failure(f"could not read {path}", exc) from None
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None:
                return None
            return member, (_member_bytes(tar, member) if member.isfile() else b"")

    def ensure_running(self) -> None:
        """`ContainerGone` unless the container is running."""
        state = self._state()
        if state.get("Status") == "paused":
            raise ContainerPaused("the container was paused from outside the environment: the engine refuses to run "
                                  "commands in it")
        if state.get("Status") != "running":
            raise (OutOfMemory if state.get("OOMKilled") else ContainerGone)(describe_stopped(state))

    def remove(self) -> None:
        """Remove the container (and everything running in it). Safe to call twice."""
        self._finalizer()

    def _state(self) -> dict[str, Any]:
        import docker

        try:
            return self.client.api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return {"Status": "removed"}
        except Exception as exc:
            return {"Status": f"unreachable ({exc})"}

    def _failure(self, what: str, exc: Exception) -> SandboxError:
        try:
            self.ensure_running()
        except ContainerPaused:
            pass  # frozen (by grading, which reads it so, or from outside): the engine's own error says what failed
        except ContainerGone as gone:
            return gone
        return SandboxError(f"{what} in container {self.name}: {exc}")


_CHANGE_KINDS = {0: "changed", 1: "added", 2: "deleted"}
_STORAGE_OPT_SUPPORTED: dict[str, bool] = {}


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    extracted = tar.extractfile(member)
    if extracted is None:
        raise ValueError(f"{member.name} is not a regular file")
    return extracted.read()


def tar_archive(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    """An uncompressed tar of {path: content}, stamped now (a stale mtime could keep stale .pyc files)."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()


def describe_stopped(state: dict[str, Any]) -> str:
    status = state.get("Status", "unknown")
    if status == "removed":
        return "the container was removed from outside the environment"
    oom = state.get("OOMKilled")
    why = "the engine killed it for exceeding its memory limit" if oom else "it was stopped or killed from outside"
    return f"the container is {status}, exit code {state.get('ExitCode')}: {why}"


def _remove_container(api: Any, container_id: str) -> None:
    try:
        api.remove_container(container_id, force=True)
    except Exception:  # already gone, or the engine is unreachable at exit: the reaper will find it
        pass


# -- ownership and orphan reaping ---------------------------------------------------------------


def owner_labels() -> dict[str, str]:
    """Labels naming the current process, so a later process can tell whether it is still alive."""
    pid = os.getpid()
    return {LABEL_HOST: _hostname(), LABEL_PID: str(pid), LABEL_START: process_start_time(pid) or ""}


def process_start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot, from /proc), to tell it from a later process with the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode()  # field 22 of stat(5); fields[0] here is field 3


def owner_alive(pid: int, start: str) -> bool:
    """Whether the process that labelled a container still runs (a reused pid does not count)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    current = process_start_time(pid)
    return not start or current is None or current == start


def reap_orphans(client: Any) -> list[str]:
    """Remove this host's gymenvs containers whose owning process is gone; return their names."""
    reaped = []
    for container in client.containers.list(all=True, sparse=True, filters={"label": [LABEL, f"{LABEL_HOST}={_hostname()}"]}):
        labels = container.attrs.get("Labels") or {}
        pid = labels.get(LABEL_PID, "")
        if pid.isdigit() and not owner_alive(int(pid), labels.get(LABEL_START, "")):  # no owner label: not ours to judge
            _remove_container(client.api, container.id)
            reaped.append(container.attrs.get("Names", [container.id])[0].lstrip("/"))
    return reaped


_reap_lock = threading.Lock()
_reaped_in: dict[int, list[str]] = {}  # pid -> what its one reaping removed


def reap_orphans_once(client: Any) -> list[str]:
    """`reap_orphans` the first time this process calls it; later calls return that first result."""
    with _reap_lock:
        if os.getpid() not in _reaped_in:
            _reaped_in[os.getpid()] = reap_orphans(client)
        return _reaped_in[os.getpid()]


def remove_own_containers(client: Any) -> list[str]:
    """Remove every container this process owns (its pool's included); return their ids."""
    mine = [f"{LABEL_PID}={os.getpid()}", f"{LABEL_HOST}={_hostname()}"]
    owned = client.containers.list(all=True, sparse=True, filters={"label": mine})
    for container in owned:
        _remove_container(client.api, container.id)
    return [container.id for container in owned]


_sigterm_installed: set[int] = set()


def install_sigterm_cleanup() -> bool:
    """On SIGTERM, remove this process's containers, then let the previous handler (or the default:
    death by the signal) act. Installed once per process, from the main thread only (Python's rule);
    returns whether a handler is in place."""
    pid = os.getpid()
    if pid in _sigterm_installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        return False

    def on_sigterm(signum: int, frame: Any) -> None:
        try:
            remove_own_containers(shared_client())
        finally:
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    _sigterm_installed.add(pid)
    return True


@cache
def _hostname() -> str:
    return socket.gethostname()
