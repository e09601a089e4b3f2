"""The Docker runtime: `DockerRuntime` (the engine's operations) and `DockerSandbox` (one container)."""

from gymenvs.container.runtime.docker.runtime import DockerRuntime
from gymenvs.container.runtime.docker.sandbox import DockerSandbox

__all__ = ["DockerRuntime", "DockerSandbox"]
