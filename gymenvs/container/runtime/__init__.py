"""Container runtimes: every engine operation of the container envs goes through a `Runtime`.

`base` holds the `Runtime` and `Sandbox` protocols, `Limits` and the errors; `owners` the labels that
say who owns a container, an image or a volume; `commands` what every sandbox does the same way once it
can start a process; `requirements` what a task may need of a runtime; `docker/` the Docker runtime,
`podman/` the Podman one. A new runtime is one package beside them, and one name in `RUNTIMES`.
"""

from __future__ import annotations

import importlib
import os
import threading
from urllib.parse import urlsplit

from gymenvs.container.runtime.base import (
    SIZE_PATTERN,
    ContainerGone,
    ContainerPaused,
    DiskLimitExceeded,
    ExecProcess,
    ExecResult,
    ImageBuildError,
    ImageConfig,
    ImageMissing,
    Limits,
    LimitsNotEnforced,
    OutOfMemory,
    PathStat,
    Runtime,
    Sandbox,
    SandboxError,
    Sidecars,
    UnenforcedLimits,
    parse_size,
)

__all__ = [
    "ENGINE_SCHEMES", "RUNTIMES", "SIZE_PATTERN", "ContainerGone", "ContainerPaused", "DiskLimitExceeded", "ExecProcess",
    "ExecResult", "ImageBuildError", "ImageConfig", "ImageMissing", "Limits", "LimitsNotEnforced", "OutOfMemory",
    "PathStat", "Runtime", "Sandbox", "SandboxError", "Sidecars", "UnenforcedLimits", "check_choice", "parse_size",
    "runtime_class", "shared_runtime",
]

#: The runtimes by name (`runtime=` of a container env, `--runtime` of the commands): the class of each.
RUNTIMES = {"docker": "gymenvs.container.runtime.docker:DockerRuntime",
            "podman": "gymenvs.container.runtime.podman:PodmanRuntime"}
#: The schemes of an engine URL (`engine=`, `--engine`) the docker SDK reaches.
ENGINE_SCHEMES = ("unix", "tcp", "http", "https", "ssh")

_shared: dict[tuple[int, str, str | None], Runtime] = {}
_shared_lock = threading.Lock()


def check_choice(name: str, engine: str | None = None) -> None:
    """`ValueError` naming a runtime name or engine URL that is not allowed, and what is."""
    if name not in RUNTIMES:
        raise ValueError(f"runtime={name!r}: allowed are {', '.join(map(repr, RUNTIMES))}")
    if engine is not None and (not isinstance(engine, str) or urlsplit(engine).scheme not in ENGINE_SCHEMES
                               or not urlsplit(engine).netloc + urlsplit(engine).path):
        raise ValueError(f"engine={engine!r}: give the engine's URL, with a scheme among {', '.join(ENGINE_SCHEMES)} "
                         "(e.g. 'unix:///run/podman/podman.sock', 'tcp://10.0.0.5:2375', 'ssh://user@host')")


def runtime_class(name: str) -> type[Runtime]:
    """The class of the runtime `name` (imported, no engine touched); `ValueError` for an unknown name."""
    check_choice(name)
    module, _, attribute = RUNTIMES[name].partition(":")
    runtime: type[Runtime] = getattr(importlib.import_module(module), attribute)
    return runtime


def shared_runtime(name: str = "docker", engine: str | None = None) -> Runtime:
    """This process's runtime `name` of `engine` (None: the runtime's default, `DOCKER_HOST` / `CONTAINER_HOST`
    or its standard socket), created (and the engine pinged) on first use and shared by the process's envs, pools
    and threads. A forked child gets its own."""
    cls = runtime_class(name)
    check_choice(name, engine)
    key = (os.getpid(), name, engine)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = cls(engine)  # type: ignore[call-arg]  # every runtime class takes its engine first
        return _shared[key]
