"""The Podman `Runtime`: a rootful Podman engine, driven through its Docker-compatible API.

Podman serves the Docker engine API (`podman system service`), and the docker SDK drives it: the code of
`DockerRuntime` and `DockerSandbox` serves unchanged, but for what this class mends or declares:

- an imported image is named `repository:latest` whatever tag is asked (Podman 4.3): it is re-tagged;
- Docker's variables (`DOCKER_HOST`, its TLS settings) are not read: `CONTAINER_HOST` is Podman's;
- a compose sidecar's healthcheck never runs where the engine has no systemd (Podman runs healthchecks from
  systemd timers), so a task waiting for a healthy service is refused (`lacks`).

Differences that need no code (docs/runtimes.md): the disk limit is watched, never capped by the engine; a
container the OOM killer stops is reported as stopped, not OOM-killed; an exec costs about 3.5 times Docker's.
Rootless Podman (its socket under $XDG_RUNTIME_DIR) is not covered yet.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from gymenvs.container.runtime.base import SandboxError
from gymenvs.container.runtime.docker.compose import DockerSidecars
from gymenvs.container.runtime.docker.runtime import DockerRuntime
from gymenvs.container.runtime.requirements import COMPOSE_HEALTHCHECK

#: The socket of the rootful API service (`podman system service`, and podman.socket under systemd).
DEFAULT_ENGINE = "unix:///run/podman/podman.sock"
_HEALTHY = "service_healthy"


class PodmanRuntime(DockerRuntime):
    """A rootful Podman engine: `engine` is its URL (default: `CONTAINER_HOST`, else the rootful socket)."""

    name = "podman"
    lacks: ClassVar[Mapping[str, str]] = {
        COMPOSE_HEALTHCHECK: "it waits for a sidecar's healthcheck, which Podman runs from a systemd timer: where "
                             "the engine has no systemd the service never turns healthy (use runtime='docker')",
    }
    start_hint = "start its API service (`podman system service --time=0 unix:///run/podman/podman.sock`) or set CONTAINER_HOST"

    def __init__(self, engine: str | None = None, *, timeout: int = 600):
        super().__init__(engine or os.environ.get("CONTAINER_HOST") or DEFAULT_ENGINE, timeout=timeout)

    @staticmethod
    def _environment_options() -> dict[str, Any]:
        """None: `DOCKER_HOST` and Docker's TLS settings name a Docker engine, not this one (`CONTAINER_HOST` does)."""
        return {}

    def import_image(self, chunks: Iterable[bytes], repository: str, tag: str, changes: list[str]) -> None:
        """As `DockerRuntime.import_image`, then named `repository:tag` (Podman names an import `repository:latest`)."""
        image_id = self._import(chunks, repository, tag, changes)
        if tag == "latest":
            return
        self.client.api.tag(image_id, repository, tag)
        self.client.api.remove_image(f"{repository}:latest")  # only the name: the image keeps `tag`

    def start_sidecars(self, files: Sequence[Path], *, project_directory: Path, images: Mapping[str, str],
                       wait_for: Mapping[str, str], episode_id: str, network: bool, volumes: Sequence[str] = (),
                       timeout: float = 120.0) -> DockerSidecars:
        healthy = sorted(service for service, condition in wait_for.items() if condition == _HEALTHY)
        if healthy:
            raise SandboxError(f"the sidecars {healthy}: {self.lacks[COMPOSE_HEALTHCHECK]}")
        return super().start_sidecars(files, project_directory=project_directory, images=images, wait_for=wait_for,
                                      episode_id=episode_id, network=network, volumes=volumes, timeout=timeout)
