"""The Docker `Runtime`: every engine operation of gymenvs, on the `docker` SDK.

One `DockerRuntime` holds one client of one engine (`DOCKER_HOST`, or the local socket); its connection
pool is thread-safe, so a process's envs, pools and threads share it (`gymenvs.container.runtime.shared_runtime`).

Each container goes at `remove()` or, forgotten, by its finalizer at interpreter exit. One can be starting on
a daemon thread as the process exits (an episode of `gymenvs eval` that a SIGTERM cut short): too late for a
finalizer. So at exit each runtime of the process first refuses new starts, waits for those under way, then
removes every container still labelled with this process as its owner (`_sweep_at_exit`).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from gymenvs.container.runtime.base import (
    ImageBuildError,
    ImageConfig,
    ImageMissing,
    Limits,
    Sandbox,
    SandboxError,
    enforceable,
)
from gymenvs.container.runtime.docker.compose import DockerSidecars
from gymenvs.container.runtime.docker.disk import DiskWatch
from gymenvs.container.runtime.docker.egress import Egress
from gymenvs.container.runtime.docker.sandbox import DockerSandbox, container_options
from gymenvs.container.runtime.owners import LABEL, LABEL_HOST, LABEL_ROLE, hostname, labels_for, owner_labels

#: The docker SDK's engine when neither `engine` nor `DOCKER_HOST` names one.
_DEFAULT_ENGINE = "unix:///var/run/docker.sock"
_LOG_LINES = 20
#: Seconds the exit sweep waits for the containers being started to be started.
_EXIT_WAIT_S = 30.0
_runtimes: weakref.WeakSet[DockerRuntime] = weakref.WeakSet()  # this process's, swept at exit
_sweep_registered_in: set[int] = set()


class DockerRuntime:
    """A Docker engine: `engine` is its URL (default: `DOCKER_HOST`, else the local socket)."""

    name = "docker"
    #: What this runtime cannot do, by requirement (`gymenvs.container.runtime.requirements`): none.
    lacks: ClassVar[Mapping[str, str]] = {}
    #: The resource limits its containers would not get -> why: none (a rootless Docker is not covered).
    unenforced: Mapping[str, str] = {}
    #: Whether the engine can freeze a container's processes (`DockerSandbox.pause`, and while it commits one).
    can_freeze = True
    #: How to start this runtime's engine, for the error saying none answers.
    start_hint = "start one (e.g. `dockerd`) or set DOCKER_HOST"
    #: What runs a task's compose sidecars (`start_sidecars`).
    sidecars_class: ClassVar[type[DockerSidecars]] = DockerSidecars
    #: Whether a container without a network is created with the engine's networking disabled (`HOSTS_PATH`).
    disables_networking = True

    def __init__(self, engine: str | None = None, *, timeout: int = 600):
        try:
            import docker
        except ImportError as exc:
            raise ImportError("the container envs need the docker SDK: pip install 'gymenvs[swe]'") from exc
        self._client_options: dict[str, Any] = {**self._environment_options(), "timeout": timeout}
        self._engine = engine
        if engine is not None:
            self._client_options["base_url"] = engine
        try:
            self.client = docker.DockerClient(max_pool_size=32, **self._client_options)
            self.client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxError(f"no {self.name} engine answers ({exc}); {self.start_hint}") from None
        self.disk_watch = DiskWatch(self.name)
        self._pid = os.getpid()
        self._starting = 0
        self._exiting = False
        self._starts = threading.Condition()
        if self._pid not in _sweep_registered_in:  # once per process (a forked child registers its own)
            atexit.register(_sweep_at_exit)
            _sweep_registered_in.add(self._pid)
        _runtimes.add(self)

    @functools.cached_property
    def overlay_layers(self) -> bool:
        """Whether the engine keeps containers' writable layers as plain overlay directories: `overlay2` with its
        native diff (no redirected or metadata-only copies), which `DockerSandbox.changed_paths` can read."""
        info = self.client.info()
        return info.get("Driver") == "overlay2" and dict(info.get("DriverStatus") or []).get("Native Overlay Diff") == "true"

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "engine": self._client_options.get("base_url", _DEFAULT_ENGINE),
                "unenforced": dict(self.unenforced), "can_freeze": self.can_freeze}

    @staticmethod
    def _environment_options() -> dict[str, Any]:
        """The client options the process environment sets: `DOCKER_HOST`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`."""
        import docker

        return docker.utils.kwargs_from_env()

    # -- sandboxes --------------------------------------------------------------------------------

    def start(self, image: str, *, role: str, episode_id: str, limits: Limits = Limits(), workdir: str = "/",
              labels: Mapping[str, str] | None = None, volumes: Mapping[str, str] | None = None,
              network_of: Sandbox | None = None) -> DockerSandbox:
        limits = enforceable(limits, self.unenforced, self.name)
        options = container_options(role, episode_id, limits, workdir, labels=labels, volumes=volumes,
                                    disable_networking=self.disables_networking)
        egress, joins_hostless = None, False
        if network_of is not None:  # its network is the other's, rules included
            for key in ("network", "networking_config", "network_disabled"):
                options.pop(key, None)
            options["network_mode"] = f"container:{network_of.id}"
            joins_hostless = isinstance(network_of, DockerSandbox) and network_of.writes_hosts
        elif limits.network and limits.allowed_hosts is not None:
            egress = self._egress(limits)
            options["extra_hosts"] = egress.pinned
        if network_of is None and limits.network_name is not None:
            options["extra_hosts"] = {**options.get("extra_hosts", {}), **self._sidecar_hosts(limits.network_name)}
        with self._starting_one():
            sandbox = DockerSandbox(self, self.client, image, options, limits=limits, workdir=workdir,
                                    freezes=self.can_freeze, disk_watch=self.disk_watch,
                                    overlay_layers=self.overlay_layers, writes_hosts=joins_hostless)
        if egress is not None:
            try:
                egress.apply(self.client.api.inspect_container(sandbox.id)["State"]["Pid"])
            except BaseException:
                sandbox.remove()
                raise
        return sandbox

    def _sidecar_hosts(self, network: str) -> dict[str, str]:
        """Names of the sidecars on `network` to pin in a joining sandbox's /etc/hosts: none, the engine's DNS answers."""
        return {}

    def _egress(self, limits: Limits) -> Egress:
        """The allowlist of `limits`, plus the sidecars' network the sandbox joins (they are part of its task)."""
        hosts = list(limits.allowed_hosts or ())
        if limits.network_name is not None:
            network = self.client.networks.get(limits.network_name)
            hosts += [config["Subnet"] for config in network.attrs["IPAM"]["Config"] or [] if config.get("Subnet")]
        return Egress.allowing(hosts)

    def create(self, image: str, *, role: str) -> DockerSandbox:
        options = {"command": ["true"], "labels": labels_for(role)}
        with self._starting_one():
            return DockerSandbox(self, self.client, image, options, limits=Limits(disk_limit=None), workdir="/", start=False,
                                 freezes=self.can_freeze, disk_watch=self.disk_watch, overlay_layers=self.overlay_layers)

    @contextmanager
    def _starting_one(self) -> Iterator[None]:
        with self._starts:
            if self._exiting:
                raise SandboxError("the process is exiting: no container starts now")
            self._starting += 1
        try:
            yield
        finally:
            with self._starts:
                self._starting -= 1
                self._starts.notify_all()

    def _sweep(self) -> None:
        """Refuse new starts, wait for those under way, and remove every container this process owns here."""
        with self._starts:
            self._exiting = True
            self._starts.wait_for(lambda: self._starting == 0, timeout=_EXIT_WAIT_S)
        mine = {"label": [f"{key}={value}" for key, value in owner_labels().items()]}
        try:
            for container in self.client.containers.list(all=True, sparse=True, filters=mine):
                self._remove_container(container.id)
            for network in self.client.networks.list(filters=mine):
                self._remove_network(network)
        except Exception:  # the engine is gone: the next process's reaper removes them
            pass

    # -- sidecars ---------------------------------------------------------------------------------

    def start_sidecars(self, files: Sequence[Path], *, project_directory: Path, images: Mapping[str, str],
                       wait_for: Mapping[str, str], episode_id: str, network: bool, volumes: Sequence[str] = (),
                       timeout: float = 120.0) -> DockerSidecars:
        with self._starting_one():
            return self.sidecars_class(self.client, self._engine, files, project_directory=project_directory,
                                       images=images, wait_for=wait_for, episode_id=episode_id, network=network,
                                       volumes=volumes, timeout=timeout)

    # -- images -----------------------------------------------------------------------------------

    def image_exists(self, name: str) -> bool:
        import docker

        try:
            self.client.images.get(name)
        except docker.errors.ImageNotFound:
            return False
        return True

    def pull(self, name: str) -> None:
        import docker

        try:
            self.client.images.pull(name)
        except docker.errors.DockerException as exc:
            raise ImageMissing(f"image {name!r} could not be pulled: {exc}") from None

    def tag(self, name: str, new_name: str) -> None:
        import docker

        repository, version = _split_tag(new_name)
        try:
            self.client.images.get(name).tag(repository, version)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"image {name!r} is not present locally") from None

    def push(self, name: str) -> None:
        repository, version = _split_tag(name)
        try:
            for message in self.client.images.push(repository, version, stream=True, decode=True):
                if "error" in message:  # the engine reports a failed push in the stream, not as an HTTP error
                    raise ImageBuildError(f"pushing {name!r} failed: {message['error']}")
        except ImageBuildError:
            raise
        except Exception as exc:
            raise ImageBuildError(f"pushing {name!r} failed: {exc}") from None

    def image_config(self, name: str) -> ImageConfig:
        import docker

        try:
            attrs = self.client.images.get(name).attrs
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"image {name!r} is not present locally") from None
        config = attrs.get("Config") or {}
        environment = dict(entry.split("=", 1) for entry in config.get("Env") or [] if "=" in entry)
        return ImageConfig(attrs["Id"], config.get("WorkingDir") or "/", environment)

    def build(self, context: bytes | Path, tag: str, *, dockerfile: str = "Dockerfile",
              labels: Mapping[str, str] | None = None, timeout: float | None = None, network: bool = True,
              on_output: Callable[[str], None] | None = None) -> str:
        """Build `tag` from the tar `context`, pulling nothing; its id. Past `timeout` seconds the build's
        connection is shut, which makes the engine cancel the build."""
        return _Build(self, tag, timeout).run(context, dockerfile=dockerfile, labels=labels, network=network,
                                                on_output=on_output)

    def import_image(self, chunks: Iterable[bytes], repository: str, tag: str, changes: list[str]) -> None:
        self._import(chunks, repository, tag, changes)

    def _import(self, chunks: Iterable[bytes], repository: str, tag: str, changes: list[str]) -> str:
        """Import the image; the id the engine answers."""
        try:
            answer = self.client.api.import_image_from_stream(chunks, repository=repository, tag=tag, changes=changes)
        except Exception as exc:
            raise ImageBuildError(f"importing {repository}:{tag} failed: {exc}") from None
        last = json.loads(answer.strip().splitlines()[-1])
        return last.get("id") or last["status"]

    def remove_image(self, name: str) -> None:
        try:
            self.client.images.remove(name, force=True)
        except Exception:  # gone, or in use; labelled, so a later reap finds it
            pass

    def prune_images(self, label: str) -> None:
        self.client.images.prune(filters={"dangling": True, "label": label})

    # -- volumes ----------------------------------------------------------------------------------

    def create_volume(self, name: str, *, role: str) -> str:
        try:
            return self.client.volumes.create(name=name, labels=labels_for(role)).name
        except Exception as exc:
            raise SandboxError(f"could not create the volume {name}: {exc}") from None

    def volume_directory(self, name: str) -> str | None:
        """The local volume's mount point, when it is a directory of this host owned by this process's user: then the
        engine runs here and its containers' root is this user (not rootless, no user namespace remapping)."""
        try:
            mountpoint = self.client.api.inspect_volume(name).get("Mountpoint") or ""
            owner = os.stat(mountpoint).st_uid if mountpoint.startswith("/") else None
        except Exception:  # gone, or not a path of this host
            return None
        if owner != os.geteuid() or not os.access(mountpoint, os.R_OK | os.W_OK | os.X_OK):
            return None
        return mountpoint

    def remove_volume(self, name: str) -> None:
        try:
            self.client.api.remove_volume(name, force=True)
        except Exception:  # in use or gone; labelled, so a later reap finds it
            pass

    # -- ownership --------------------------------------------------------------------------------

    def reap(self, orphaned: Callable[[Mapping[str, str]], bool]) -> list[str]:
        """Remove this host's containers, then snapshot images and volumes, whose owner `orphaned` says is gone."""
        mine = {"label": [LABEL, f"{LABEL_HOST}={hostname()}"]}
        removed = []
        for container in self.client.containers.list(all=True, sparse=True, filters=mine):
            if orphaned(container.attrs.get("Labels") or {}):
                self._remove_container(container.id)
                removed.append(container.attrs.get("Names", [container.id])[0].lstrip("/"))
        # by one label: Podman 4.3 lists no image for several (`orphaned` judges the host, gymenvs' mark is checked);
        # the plain listing, as the SDK's inspects each image and fails on one another process removes meanwhile
        for image in self.client.api.images(filters={"label": f"{LABEL_ROLE}=snapshot"}):
            labels = image.get("Labels") or {}
            if LABEL in labels and orphaned(labels):
                self.remove_image(image["Id"])
                removed += [tag for tag in image.get("RepoTags") or [] if tag != "<none>:<none>"] or [image["Id"]]
        for volume in self.client.volumes.list(filters=mine):
            if orphaned(volume.attrs.get("Labels") or {}):
                self.remove_volume(volume.name)
                removed.append(volume.name)
        for network in self.client.networks.list(filters=mine):  # sidecars' networks, once their containers are gone
            if orphaned(network.attrs.get("Labels") or {}):
                self._remove_network(network)
                removed.append(network.name)
        return removed

    def close(self) -> None:
        self.client.close()

    @staticmethod
    def _remove_network(network: Any) -> None:
        try:
            network.remove()
        except Exception:  # a container still on it, or gone meanwhile
            pass

    def _remove_container(self, container_id: str) -> None:
        """Remove a container, if it is still there."""
        try:
            self.client.api.remove_container(container_id, force=True, v=True)
        except Exception:  # gone meanwhile
            pass


class _Build:
    """One image build on a client of its own, so that its connection can be shut from a watchdog: the
    blocked read of the build's log then ends, and the engine cancels a build whose client went away."""

    def __init__(self, runtime: DockerRuntime, tag: str, timeout: float | None):
        import docker

        # the SDK's timeout is per read: past the limit, so that the watchdog, not a read, ends a silent build
        options = {**runtime._client_options, **({"timeout": int(timeout) + 60} if timeout else {})}
        self.api = docker.APIClient(**options)
        self.api.hooks["response"].append(self._keep_response)
        self.tag, self.timeout = tag, timeout
        self.timed_out = threading.Event()
        self._response: Any = None
        self.log: list[str] = []

    def run(self, context: bytes | Path, *, dockerfile: str, labels: Mapping[str, str] | None, network: bool,
            on_output: Callable[[str], None] | None) -> str:
        import io

        watchdog = threading.Timer(self.timeout, self._cut) if self.timeout else None
        image_id = ""
        source = {"path": str(context)} if isinstance(context, Path) else {"fileobj": io.BytesIO(context), "custom_context": True}
        try:
            stream = self.api.build(**source, tag=self.tag, dockerfile=dockerfile, rm=True, forcerm=True, decode=True,
                                    labels=dict(labels or {}), network_mode=None if network else "none")
            if watchdog is not None:
                watchdog.daemon = True
                watchdog.start()
            for chunk in stream:
                image_id = self._read(chunk, on_output) or image_id
        except ImageBuildError:
            if not self.timed_out.is_set():
                raise
        except Exception as exc:  # the engine failed, a read timed out, or the watchdog cut the stream
            if not self.timed_out.is_set():
                raise ImageBuildError(f"building {self.tag} failed: {exc}\n{self._tail()}") from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            self.api.close()
        if self.timed_out.is_set():
            raise ImageBuildError(f"building {self.tag} took more than {self.timeout:g} s; the build was cancelled\n"
                                  + self._tail())
        return image_id

    def _read(self, chunk: dict[str, Any], on_output: Callable[[str], None] | None) -> str | None:
        if "error" in chunk:
            raise ImageBuildError(f"building {self.tag} failed: {chunk['error'].strip()}\n{self._tail()}")
        text = chunk.get("stream", "")
        self.log.append(text)
        if on_output is not None and text:
            on_output(text)
        return (chunk.get("aux") or {}).get("ID")

    def _keep_response(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        self._response = response
        return response

    def _cut(self) -> None:
        import socket

        self.timed_out.set()
        if self._response is None:
            return
        connection = self._response.raw.connection
        sock = getattr(connection, "sock", None)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
            else:
                self._response.close()
        except OSError:
            pass

    def _tail(self) -> str:
        return "".join(self.log[-_LOG_LINES:])


def _sweep_at_exit() -> None:
    """At interpreter exit: each runtime this process made removes the containers it still owns."""
    for runtime in list(_runtimes):
        if runtime._pid == os.getpid():  # not a forked child's copy: its client belongs to the parent
            runtime._sweep()


def _split_tag(name: str) -> tuple[str, str]:
    """("host:port/repository", "tag") of an image name; a name without a tag is "latest" (a registry's port is no tag)."""
    repository, _, version = name.rpartition(":")
    if not repository or "/" in version:
        return name, "latest"
    return repository, version
