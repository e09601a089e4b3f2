"""The Podman runtime: `PodmanRuntime`, a rootful Podman engine through its Docker-compatible API."""

from gymenvs.container.runtime.podman.runtime import DEFAULT_ENGINE, PodmanRuntime

__all__ = ["DEFAULT_ENGINE", "PodmanRuntime"]
