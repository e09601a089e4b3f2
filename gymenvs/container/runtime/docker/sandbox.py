"""The Docker `Sandbox`: one labelled, resource-limited, hardened container per episode (or grading run).

Containers keep only the capabilities a root user editing files and running tests needs (no raw
sockets, no mknod), run with `no-new-privileges`, and have their writable layer watched against a disk
limit (the engine's `storage_opt size` where it supports it). Each is removed by `remove()`, or by a
`weakref.finalize` when it is forgotten (so at interpreter exit too); what a killed process leaves is
reaped by a later one (`DockerRuntime.reap`).
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import gymenvs.container.runtime.commands as commands
from gymenvs.container.runtime.base import (
    ChangeKind,
    ContainerGone,
    ContainerPaused,
    DiskLimitExceeded,
    ExecResult,
    ImageMissing,
    Limits,
    OutOfMemory,
    PathStat,
    Runtime,
    SandboxError,
)
from gymenvs.container.runtime.docker.disk import DiskWatch
from gymenvs.container.runtime.docker.exec import ExecStream
from gymenvs.container.runtime.docker.layer import layer_archive, layer_changes, readable_layers, write_before_start
from gymenvs.container.runtime.docker.procfs import loopback_listener, tcp_listening
from gymenvs.container.runtime.owners import LABEL_EPISODE, labels_for

if TYPE_CHECKING:
    import docker

#: Capabilities a container keeps (Docker's defaults minus NET_RAW, MKNOD, SETFCAP, SETPCAP, SYS_CHROOT
#: and AUDIT_WRITE). DAC_OVERRIDE stays, as in Docker's defaults: root in a task image may read and write files it
#: does not own.
KEPT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE")
SECURITY_OPTIONS = ("no-new-privileges:true",)
_CHANGE_KINDS: dict[int, ChangeKind] = {0: "changed", 1: "added", 2: "deleted"}
# Go's os.FileMode bits, as the engine reports a path's mode.
_MODE_DIR = 1 << 31
_MODE_SYMLINK = 1 << 27
_MODE_IRREGULAR = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)  # device, pipe, socket, char device, irregular
#: Where the engine mounts its init program (`init=True`) in a container, as its writable layer names it (/sbin a link
#: to /usr/sbin, or not).
_INIT_PATHS = ("/sbin/docker-init", "/usr/sbin/docker-init")
_STORAGE_OPT_SUPPORTED: dict[str, bool] = {}
#: A container without a network is created with the engine's networking disabled: the engine then sets up no
#: network sandbox for it and runs no hook of its own at its start (about 0.1 s of each start, docs/performance.md,
#: "Containers without the engine's network sandbox"); its namespace has the loopback only, as with network "none".
#: Nor does the engine then mount an /etc/hosts naming localhost: the sandbox writes this one before the start.
HOSTS_PATH = "/etc/hosts"
_HOSTS = (b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
          b"ff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n")
_ALIASES_API = "1.22"  # the engine API version that added network aliases (the SDK checks the one it is given)


def container_options(role: str, episode_id: str, limits: Limits, workdir: str, *,
                      labels: Mapping[str, str] | None = None, volumes: Mapping[str, str] | None = None,
                      disable_networking: bool = True) -> dict[str, Any]:
    """The `containers.create` keywords of a sandbox: its limits, labels and volumes; without a network, the engine's
    networking disabled where `disable_networking` (`HOSTS_PATH`)."""
    # a fresh volume stays empty: nothing of the image at its mount point is copied in
    binds = {volume: {"bind": inside, "mode": "rw,nocopy"} for volume, inside in (volumes or {}).items()}
    return dict(
        **_network_options(limits, disable_networking),
        command=["sleep", str(limits.lifetime_seconds)],
        name=f"gymenvs-{role}-{uuid.uuid4().hex[:12]}",
        labels=labels_for(role, **{**(labels or {}), LABEL_EPISODE: episode_id}),
        working_dir=workdir,
        init=True,
        mem_limit=limits.mem_limit,
        memswap_limit=limits.mem_limit,
        nano_cpus=None if limits.cpus is None else int(limits.cpus * 1e9),
        pids_limit=limits.pids_limit,
        cap_drop=["ALL"],
        cap_add=list(KEPT_CAPABILITIES),
        security_opt=list(SECURITY_OPTIONS),
        volumes=binds,
    )


def mount_points(options: Mapping[str, Any], *, writes_hosts: bool = False) -> frozenset[str]:
    """Where the engine mounts something over a container created with `options`: its init program, volumes; and
    /etc/hosts where the sandbox writes it in the engine's stead (`writes_hosts`)."""
    mounted = {bind["bind"] for bind in (options.get("volumes") or {}).values()}
    return frozenset(mounted | set(_INIT_PATHS if options.get("init") else ()) | ({HOSTS_PATH} if writes_hosts else set()))


def _network_options(limits: Limits, disable_networking: bool) -> dict[str, Any]:
    """Join the sidecars' network as "main" (`Limits.network_name`), else the default bridge, or none (with the
    engine's networking disabled where `disable_networking`: `HOSTS_PATH`)."""
    if limits.network_name is None:
        if limits.network:
            return {"network_mode": None}
        return {"network_mode": "none", **({"network_disabled": True} if disable_networking else {})}
    from docker.types import EndpointConfig

    return {"network": limits.network_name,
            "networking_config": {limits.network_name: EndpointConfig(version=_ALIASES_API, aliases=["main"])}}


class DockerSandbox:
    """One container of `image`, started (unless `start=False`) and removed when no longer needed. Made by
    `DockerRuntime.start` and `DockerRuntime.create`."""

    def __init__(self, runtime: Runtime, client: docker.DockerClient, image: str, options: dict[str, Any], *,
                 limits: Limits, workdir: str, disk_watch: DiskWatch, start: bool = True, freezes: bool = True,
                 overlay_layers: bool = False, writes_hosts: bool = False):
        """`client`: the runtime's docker SDK client; `disk_watch`: its `DiskWatch`; `freezes`: whether its engine can
        freeze a container; `overlay_layers`: whether its engine keeps writable layers as plain overlay directories
        (`changed_paths` reads them on this host where it can); `writes_hosts`: whether to write /etc/hosts before
        the start, where the engine mounts none (networking disabled, or that of a container so created joined:
        `HOSTS_PATH`)."""
        self.runtime = runtime
        self._freezes = freezes
        self._client = client
        self.image = image
        self.workdir = workdir
        self.limits = limits
        self.disk_capped = False
        self.writes_hosts = writes_hosts or bool(options.get("network_disabled"))
        self._mount_points = mount_points(options, writes_hosts=self.writes_hosts)
        self._overlay_layers = overlay_layers
        self._layers: tuple[str, list[str]] | None = None
        self._own_sockets: set[int] = set()  # the inodes of `loopback_listener`'s sockets
        container = self._create_explained(image, options)
        self.id: str = container.id
        self.name: str = container.name
        self._finalizer = weakref.finalize(self, _remove_container, self._api, self.id)
        self._disk_watch = disk_watch
        self._next_disk_check = 0.0
        self._disk_look_pending = False
        self._disk_exceeded = ""
        self._stopped = False  # by `stop`: an engine error after it is not explained by the container's state
        if start:
            if self.writes_hosts:
                self._write_hosts()
            self._start(container)

    @property
    def _api(self) -> Any:
        return self._client.api

    # -- exec -----------------------------------------------------------------------------------

    def open_exec(self, command: list[str], *, stdin: bool = False, environment: dict[str, str] | None = None) -> ExecStream:
        try:
            return ExecStream(self._api, self.id, command, stdin=stdin, environment=environment, workdir=self.workdir)
        except Exception as exc:
            raise self._failure("could not start a process", exc) from None

    def run(self, command: str, *, timeout: float, output_limit: int = 1 << 20, kill_after: float = 5.0) -> ExecResult:
        """Run `command` with bash, stopped by `timeout -k` inside the container and by a host watchdog."""
        return commands.run_command(self, command, timeout=timeout, output_limit=output_limit, kill_after=kill_after)

    def kill_all(self, signal_name: str = "KILL", *, keep: tuple[int, ...] = (), attempts: int = 20) -> None:
        commands.kill_all(self, signal_name, keep=keep, attempts=attempts)

    # -- files ----------------------------------------------------------------------------------

    def put_files(self, directory: str, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Write each {relative path: content} under `directory` of the container (which must exist)."""
        self.put_archive(directory, commands.tar_archive(files, mode))

    def put_archive(self, directory: str, archive: bytes) -> None:
        """Unpack the tar `archive` under `directory` of the container (running or stopped). The engine
        replaces an existing entry of another kind (a symbolic link where the archive has a directory) outright."""
        try:
            ok = self._api.put_archive(self.id, directory, archive)
        except Exception as exc:
            raise self._failure(f"could not write to {directory}", exc) from None
        if not ok:
            raise SandboxError(f"could not write to {directory} of container {self.name}")

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, int]:
        """The content and mode of the regular file at `path`; `FileNotFoundError` or `ValueError` otherwise."""
        import docker

        try:
            chunks, stat = self._api.get_archive(self.id, path)
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

    def fetch(self, path: str) -> tuple[tarfile.TarInfo, bytes] | None:
        """The file or symbolic link at `path` read by the engine: (tar header, content), or None if absent."""
        import docker

        try:
            data = self.read_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None:
                return None
            return member, (_member_bytes(tar, member) if member.isfile() else b"")

    def read_archive(self, path: str) -> bytes:
        """The tar archive of `path` (a file, a symbolic link or a whole directory) as the engine reads it;
        `docker.errors.NotFound` if it does not exist."""
        import docker

        try:
            chunks, _ = self._api.get_archive(self.id, path)
            return b"".join(chunks)
        except docker.errors.NotFound:
            raise
        except Exception as exc:
            raise self._failure(f"could not read {path}", exc) from None

    def stat(self, path: str) -> PathStat | None:
        """The kind and size of `path` (running or not), or None if it does not exist; nothing is read but
        the engine's answer to `HEAD .../archive` (a directory's content is not fetched)."""
        import docker

        url = f"{self._api.base_url}/v{self._api.api_version}/containers/{self.id}/archive"
        try:
            response = self._api.head(url, params={"path": path})
        except Exception as exc:
            raise self._failure(f"could not stat {path}", exc) from None
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise SandboxError(f"could not stat {path} in container {self.name}: HTTP {response.status_code}")
        stat = docker.utils.decode_json_header(response.headers["X-Docker-Container-Path-Stat"])
        mode = int(stat.get("mode", 0))
        kind: Literal["dir", "symlink", "file", "other"] = (
            "dir" if mode & _MODE_DIR else "symlink" if mode & _MODE_SYMLINK else "other" if mode & _MODE_IRREGULAR else "file")
        return PathStat(kind, int(stat.get("size", 0)), stat.get("linkTarget", ""))

    def changed_paths(self, under: str) -> dict[str, ChangeKind]:
        """What the container changed under `under`, in its writable layer as the engine keeps it (no process in
        the container is asked): {absolute path: "changed" | "added" | "deleted"}. The entries the engine made for
        what it mounts (its init program, volumes) are not the container's changes, and are left out. Where this
        process can read the container's overlay layer it reads that (`docker.layer`), else it asks the engine."""
        try:
            layers = self._readable_layers()
            changes = (layer_changes(*layers) if layers is not None else
                       {c["Path"]: _CHANGE_KINDS[c["Kind"]] for c in self._api.diff(self.id) or []})
        except Exception as exc:
            raise self._failure("could not list the changed files", exc) from None
        prefix = under.rstrip("/") + "/"
        return {path: kind for path, kind in changes.items()
                if path.startswith(prefix) and path not in self._mount_points}

    def changes_archive(self, paths: Sequence[str], limit: int) -> bytes | None:
        """A tar of `paths`, what `changed_paths` listed as added or changed, as the container's overlay layer holds
        them, read on this host (`docker.layer.layer_archive`: each entry alone, owners by number, no symbolic link
        followed); None where this process cannot read the layer, a path is not in it, or past `limit` bytes of files."""
        layers = self._readable_layers()
        if layers is None:
            return None
        try:
            return layer_archive(layers[0], paths, limit)
        except OSError:  # not readable after all: the engine's snapshot instead
            return None

    def reads_layer(self) -> bool:
        return self._readable_layers() is not None

    def _readable_layers(self) -> tuple[str, list[str]] | None:
        """The container's overlay directories if this process can read them (asked of the engine once)."""
        if self._overlay_layers and self._layers is None:
            self._layers = readable_layers(self._api.inspect_container(self.id)["GraphDriver"])
            self._overlay_layers = self._layers is not None
        return self._layers

    def listens_on_tcp(self) -> bool | None:
        """Whether a process of the running container listens on a TCP port, read on this host (`docker.procfs`:
        nothing runs in the container); None where this process cannot read it (another host's engine, another pid
        namespace, no permission) or the container is not running."""
        pid = self._init_pid()
        return tcp_listening(pid, self.id, besides=frozenset(self._own_sockets)) if pid else None

    def loopback_listener(self) -> socket.socket | None:
        """A socket of this process listening on the container's own 127.0.0.1, made in its network namespace from
        this host (`docker.procfs`); None where this process cannot enter it (another host's engine, another pid
        namespace, no permission) or the container is not running."""
        pid = self._init_pid()
        listener = loopback_listener(pid, self.id) if pid else None
        if listener is not None:  # not one of the sandbox's own listening sockets (`listens_on_tcp`)
            self._own_sockets.add(os.fstat(listener.fileno()).st_ino)
        return listener

    def _init_pid(self) -> int | None:
        """The host pid of the running container's init, as the engine reports it (None if not running)."""
        state = self._state()
        return (state.get("Pid") or None) if state.get("Running") else None

    # -- lifecycle ------------------------------------------------------------------------------

    def pause(self) -> None:
        """Freeze every process of the container (nothing left running changes its files now). Where the engine cannot
        freeze one (`DockerRuntime.can_freeze`), or runc gives up freezing it, kill them all instead (`stop`): nothing
        runs, the files stay readable."""
        if not self._freezes:
            self.stop()
            return
        try:
            self._api.pause(self.id)
        except Exception as exc:
            if "unable to freeze" not in str(exc):  # runc's words when the cgroup did not settle frozen (heavy load)
                raise self._failure("could not pause the container", exc) from None
            self.stop()

    def stop(self) -> None:
        """SIGKILL the container's init: the kernel then kills every process of its pid namespace, double-forked
        daemons included, and no program of the container takes part. A container already stopped is fine."""
        import docker

        try:
            self._api.kill(self.id)
        except docker.errors.APIError as exc:
            if "is not running" not in str(exc) and getattr(exc, "status_code", None) != 409:
                raise SandboxError(f"could not stop container {self.name}: {exc.explanation or exc}") from None
        try:
            self._api.wait(self.id, timeout=60)
        except Exception as exc:
            raise SandboxError(f"container {self.name} did not stop: {exc}") from None
        self._stopped = True

    def commit(self, repository: str, tag: str, *, labels: Mapping[str, str] | None = None, role: str = "snapshot") -> str:
        """The container's file system as the image `repository:tag` (its processes are not kept), labelled as
        owned by this process in the role `role` (`reap` removes a "snapshot" if the process dies, and no other
        role); its id."""
        changes = [f'LABEL {key}="{value}"' for key, value in labels_for(role, **(labels or {})).items()]
        try:
            return self._api.commit(self.id, repository=repository, tag=tag, changes=changes,
                                    pause=self._freezes)["Id"]
        except Exception as exc:
            raise self._failure(f"could not commit as {repository}:{tag}", exc) from None

    def check_disk(self, *, force: bool = False) -> None:
        """`DiskLimitExceeded` if the writable layer outgrew the disk limit; a no-op where the engine caps the layer
        itself. Without `force` this reads the last look and asks the runtime's `DiskWatch` for another at most once
        per `DISK_CHECK_INTERVAL`; with `force` it looks now."""
        if not self.limits.disk_limit or self.disk_capped:
            return
        if force:
            self._look_at_disk()
        elif not self._disk_look_pending and time.monotonic() >= self._next_disk_check:
            self._disk_look_pending = True
            self._disk_watch.request(self._look_at_disk)
        if self._disk_exceeded:  # sticky: the episode is over
            raise DiskLimitExceeded(self._disk_exceeded)

    def _look_at_disk(self) -> None:
        try:
            (found,) = self._api.containers(all=True, size=True, filters={"id": self.id})
            used = found.get("SizeRw") or 0
        except Exception:  # gone or unreachable: the next engine call says which
            used = 0
        finally:
            self._next_disk_check = time.monotonic() + commands.DISK_CHECK_INTERVAL
            self._disk_look_pending = False
        limit = self.limits.disk_limit or 0
        if used > limit and not self._disk_exceeded:
            self._disk_exceeded = (f"the container wrote {used / 2**20:.0f} MiB, more than its disk limit of "
                                   f"{limit / 2**20:.0f} MiB: the episode was stopped")

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

    # -- internals ------------------------------------------------------------------------------

    def _create_explained(self, image: str, options: dict[str, Any]) -> Any:
        """`_create`, with the engine's errors as `SandboxError`s that say what went wrong."""
        import docker

        try:
            return self._create(image, options)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"image {image!r} is not present locally") from None
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not create a container from {image!r}: {exc.explanation or exc}") from None

    def _create(self, image: str, options: dict[str, Any]) -> Any:
        """Create the container, with the engine capping its writable layer when the storage driver can."""
        import docker

        containers = self._client.containers
        engine = self._api.base_url
        if self.limits.disk_limit and _STORAGE_OPT_SUPPORTED.get(engine, True):
            try:
                container = containers.create(image, storage_opt={"size": str(self.limits.disk_limit)}, **options)
            except docker.errors.APIError as exc:
                if "storage-opt" not in str(exc) and "storage opt" not in str(exc):
                    raise
                _STORAGE_OPT_SUPPORTED[engine] = False  # e.g. overlay2 not on xfs with pquota: watch instead
            else:
                self.disk_capped = True
                return container
        return containers.create(image, **options)

    def _write_hosts(self) -> None:
        """Into the writable layer on this host where this process may write it (no engine call), else through the
        engine."""
        layers = self._readable_layers()
        if layers is not None:
            try:
                write_before_start(*layers, HOSTS_PATH, _HOSTS)
                return
            except OSError:
                pass
        try:
            self.put_files("/", {HOSTS_PATH.lstrip("/"): _HOSTS})  # /etc made where the image has none
        except SandboxError:
            self.remove()
            raise

    def _start(self, container: Any) -> None:
        """Start the created container; one that cannot start is removed."""
        import docker

        try:
            container.start()
        except docker.errors.APIError as exc:
            self.remove()
            raise SandboxError(f"could not start a container from {self.image!r}: {exc.explanation or exc}") from None

    def _state(self) -> dict[str, Any]:
        import docker

        try:
            return self._api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return {"Status": "removed"}
        except Exception as exc:
            return {"Status": f"unreachable ({exc})"}

    def _failure(self, what: str, exc: Exception) -> SandboxError:
        """The engine's error `exc` as a `SandboxError`: `ContainerGone` if the container died or vanished, else the
        engine's own message; so also for a container `stop` stopped, whose state would read "stopped from outside"."""
        if self._stopped and self._state().get("Status") == "exited":
            return SandboxError(f"{what} in container {self.name} (stopped by gymenvs to be read): {exc}")
        try:
            self.ensure_running()
        except ContainerPaused:
            pass  # frozen (by grading, which reads it so, or from outside): the engine's own error says what failed
        except ContainerGone as gone:
            return gone
        return SandboxError(f"{what} in container {self.name}: {exc}")


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    extracted = tar.extractfile(member)
    if extracted is None:
        raise ValueError(f"{member.name} is not a regular file")
    return extracted.read()


def describe_stopped(state: dict[str, Any]) -> str:
    status = state.get("Status", "unknown")
    if status == "removed":
        return "the container was removed from outside the environment"
    oom = state.get("OOMKilled")
    why = "the engine killed it for exceeding its memory limit" if oom else "it was stopped or killed from outside"
    return f"the container is {status}, exit code {state.get('ExitCode')}: {why}"


def _remove_container(api: Any, container_id: str) -> None:
    try:
        api.remove_container(container_id, force=True, v=True)
    except Exception:  # already gone, or the engine is unreachable at exit: the reaper will find it
        pass

