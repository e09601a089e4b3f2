"""The Podman runtime: `PodmanRuntime`, a Podman engine (rootful or rootless) through its Docker-compatible API."""

from gymenvs.container.runtime.podman.runtime import DEFAULT_ENGINE, PodmanRuntime, default_engine

__all__ = ["DEFAULT_ENGINE", "PodmanRuntime", "default_engine"]
