"""The Podman `Runtime`: a Podman engine, rootful or rootless, driven through its Docker-compatible API.

Podman serves the Docker engine API (`podman system service`), and the docker SDK drives it: the code of
`DockerRuntime` and `DockerSandbox` serves unchanged, but for what this class mends or declares:

- an imported image is named `repository:latest` whatever tag is asked (Podman 4.3): it is re-tagged;
- Docker's variables (`DOCKER_HOST`, its TLS settings) are not read: `CONTAINER_HOST` is Podman's;
- a compose sidecar's healthcheck never runs where the engine has no systemd (Podman runs healthchecks from
  systemd timers), so gymenvs runs them itself while the project starts (`PodmanSidecars`);
- its DNS server drops lookups while it reloads, on any container's start or stop: a sandbox that joins the
  sidecars' network gets their names in its /etc/hosts (`_sidecar_hosts`);
- it ignores a container's `NetworkDisabled` and mounts its own /etc/hosts whatever the network: a container
  without a network is created with network "none" only (`disables_networking`);
- a rootless engine sets a resource limit only through a cgroup controller delegated to its user, and on cgroup v1
  none is: Podman then drops the limit, and its Docker API still claims it (`/info`, `HostConfig`). So the engine's
  own API (libpod's info) is asked, once it answers, which limits it can set: the others are `unenforced`, and a
  container asking them is refused or runs without them, as its `Limits.unenforced_limits` says. Without a freezer
  cgroup it cannot freeze a container either (`can_freeze`): `pause` kills its processes instead.

Differences that need no code (docs/runtimes.md): the disk limit is watched, never capped by the engine; a
container the OOM killer stops is reported as stopped, not OOM-killed; an exec costs about 3.5 times Docker's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from gymenvs.container.runtime.base import SandboxError
from gymenvs.container.runtime.docker.compose import SERVICE_LABEL
from gymenvs.container.runtime.docker.runtime import DockerRuntime
from gymenvs.container.runtime.podman.sidecars import PodmanSidecars

#: The socket of the rootful API service (`podman system service`, and podman.socket under systemd).
DEFAULT_ENGINE = "unix:///run/podman/podman.sock"
#: Where Podman tells what the Docker API does not (rootless, its cgroups): libpod's info, under a version prefix
#: that Podman 4 and later accept.
_LIBPOD_INFO = "/v4.0.0/libpod/info"
#: The cgroup controller that sets each resource limit.
_CONTROLLERS = {"mem_limit": "memory", "cpus": "cpu", "pids_limit": "pids"}


def default_engine(environ: Mapping[str, str] = os.environ, uid: int | None = None) -> str:
    """The engine of `runtime="podman"` without `engine=`, as `podman --remote` finds it: `CONTAINER_HOST`, else as
    root the rootful service, else the user's own (rootless) one under `XDG_RUNTIME_DIR` (default /run/user/UID)."""
    uid = os.geteuid() if uid is None else uid
    if environ.get("CONTAINER_HOST"):
        return environ["CONTAINER_HOST"]
    if uid == 0:
        return DEFAULT_ENGINE
    return f"unix://{environ.get('XDG_RUNTIME_DIR') or f'/run/user/{uid}'}/podman/podman.sock"


class PodmanRuntime(DockerRuntime):
    """A Podman engine: `engine` is its URL (default: `default_engine()`). Whether it is rootless, and which resource
    limits it cannot set (`unenforced`), its engine says when the runtime is made (`info`)."""

    name = "podman"
    sidecars_class = PodmanSidecars
    disables_networking = False
    start_hint = ("start its API service (`podman system service --time=0 unix:///run/podman/podman.sock` as root, or "
                  "as yourself on unix://$XDG_RUNTIME_DIR/podman/podman.sock) or set CONTAINER_HOST")

    def __init__(self, engine: str | None = None, *, timeout: int = 600):
        super().__init__(engine or default_engine(), timeout=timeout)
        host = self._host()
        self.rootless: bool = bool(host["security"]["rootless"])
        self.cgroup_version: str = host.get("cgroupVersion", "")
        controllers = self._controllers(host.get("cgroupControllers"))
        self.unenforced = self._unenforced(controllers)
        # cgroup v2 freezes any cgroup; v1 needs its freezer controller. Else `pause` stops the container instead.
        self.can_freeze = "freezer" in controllers if self.cgroup_version == "v1" else bool(controllers)

    @staticmethod
    def _environment_options() -> dict[str, Any]:
        """None: `DOCKER_HOST` and Docker's TLS settings name a Docker engine, not this one (`CONTAINER_HOST` does)."""
        return {}

    def _host(self) -> dict[str, Any]:
        """What the engine says of its host (libpod's info: `security.rootless`, `cgroupVersion`, `cgroupControllers`)."""
        answer = self.client.api.get(self.client.api.base_url + _LIBPOD_INFO)
        if not answer.ok:
            raise SandboxError(f"the {self.name} engine did not say what it is ({_LIBPOD_INFO}: HTTP {answer.status_code})")
        host: dict[str, Any] = answer.json()["host"]
        return host

    def _controllers(self, listed: list[str] | None) -> list[str]:
        """The cgroup controllers the engine's containers get (from a Podman that does not list them: a rootful one
        has them all, a rootless one none)."""
        if listed is not None:
            return listed
        return [] if self.rootless else [*_CONTROLLERS.values(), "freezer"]

    def _unenforced(self, controllers: list[str]) -> dict[str, str]:
        """The resource limits this engine cannot set -> why, from the cgroup controllers its containers get."""
        if self.rootless and self.cgroup_version == "v1":
            why = ("rootless Podman on cgroup v1 gets no cgroup of its own, so it drops every resource limit (cgroup v2 "
                   "with the controllers delegated to the user would set them)")
        else:
            why = f"the engine's cgroups ({self.cgroup_version}{', rootless' if self.rootless else ''}) lack its controller"
        return {limit: why for limit, controller in _CONTROLLERS.items() if controller not in controllers}

    def info(self) -> dict[str, Any]:
        return {**super().info(), "rootless": self.rootless, "cgroup_version": self.cgroup_version}

    def _sidecar_hosts(self, network: str) -> dict[str, str]:
        """Each sidecar's names on `network` (its service, container name and aliases) -> its address there.

        Podman's DNS server (aardvark-dns; Debian's 1.4 here) drops its sockets while it reloads, which it does each
        time a container of any DNS network starts or stops: a lookup then fails with no answer at all. Pinned in
        the sandbox's /etc/hosts, the sidecars' names need no DNS, as the egress allowlist's hosts need none."""
        hosts = {}
        # the compose project's containers only: not a sandbox that joined as "main" (an agent's, while a verifier starts)
        for container in self.client.containers.list(filters={"network": network, "label": SERVICE_LABEL}):
            settings = (container.attrs["NetworkSettings"]["Networks"] or {}).get(network) or {}
            address = settings.get("IPAddress")
            if address:
                names = [container.labels[SERVICE_LABEL], container.name, *(settings.get("Aliases") or [])]
                hosts.update({name: address for name in names if name and name != container.id[:12]})
        return hosts

    def import_image(self, chunks: Iterable[bytes], repository: str, tag: str, changes: list[str]) -> None:
        """As `DockerRuntime.import_image`, then named `repository:tag` (Podman names an import `repository:latest`)."""
        image_id = self._import(chunks, repository, tag, changes)
        if tag == "latest":
            return
        self.client.api.tag(image_id, repository, tag)
        self.client.api.remove_image(f"{repository}:latest")  # only the name: the image keeps `tag`
