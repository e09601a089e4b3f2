"""A Harbor task's docker-compose environment: the agent's container is the service "main", the others are its
sidecars.

As in Harbor, the task's compose file is read over a base that builds "main" from environment/ (or runs its
[environment] docker_image), and the compose tool resolves the merge. gymenvs then:

- starts the sidecars with the engine's compose tool, on the project's own private network
  (`Runtime.start_sidecars`), each from its image (a service with `build` is built once, named by its
  content, as task images are: `gymenvs.terminal.images.sidecar_images`);
- waits for what "main" `depends_on` (service_healthy, service_completed_successfully);
- starts the agent's container itself, as for any task (its limits, its grading), joined to that network under
  the alias "main", with "main"'s `environment` (`main_environment`);
- grades the agent's snapshot on the same network, with the sidecars still running as the agent left them;
- removes the sidecars with the episode (`Sidecars.remove`); a killed process's are reaped by their labels.

What "main" may set is `build` (only environment/, the default), `depends_on` and `environment`; a task that
needs more (its own `command`, volumes, ports, networks) is refused with the reason (`unsupported`), as is a
service with its own networks, since the agent's container joins the project's default network only, and a
sidecar bind-mounting a host path, since the engine need not share this host's files (named volumes are fine).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymenvs.container.runtime import Runtime, SandboxError, Sidecars
from gymenvs.terminal.task import TerminalTask

MAIN = "main"
#: The keys of "main" gymenvs applies; others make the task refused.
MAIN_KEYS = frozenset({"build", "image", "depends_on", "environment", "command"})
#: What the base gives "main" to keep it alive, as Harbor's does (the agent's container runs its own keep-alive).
_BASE_COMMAND = ["sh", "-c", "sleep infinity"]
_cache: dict[tuple[str, str], ComposeProject] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class ComposeProject:
    """A task's compose project as the compose tool resolved it."""

    services: Mapping[str, Mapping[str, Any]]
    #: The project's named volumes.
    volumes: tuple[str, ...] = ()

    @property
    def main(self) -> Mapping[str, Any]:
        return self.services.get(MAIN, {})

    @property
    def sidecars(self) -> dict[str, Mapping[str, Any]]:
        return {name: service for name, service in self.services.items() if name != MAIN}

    @property
    def wait_for(self) -> dict[str, str]:
        """What "main" depends on, with each condition."""
        depends = self.main.get("depends_on") or {}
        if isinstance(depends, list):
            return {name: "service_started" for name in depends}
        return {name: (entry or {}).get("condition", "service_started") for name, entry in depends.items()}


def read_project(task: TerminalTask) -> ComposeProject:
    """The task's compose project (its file over the base, resolved by the compose tool; cached per content)."""
    assert task.compose_file is not None
    key = (str(task.path.resolve()), hashlib.sha256(task.compose_file.read_bytes()).hexdigest())
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    from gymenvs.container.runtime.docker.compose import compose_config

    with compose_files(task) as files:
        config = compose_config(files, project_directory=task.environment_dir, engine=None)
    project = ComposeProject(config.get("services") or {}, tuple(config.get("volumes") or ()))
    with _cache_lock:
        return _cache.setdefault(key, project)


def unsupported(task: TerminalTask) -> str | None:
    """Why gymenvs cannot run this compose task as Harbor would, or None."""
    try:
        project = read_project(task)
    except SandboxError as exc:
        return f"task {task.name!r}: {exc}"
    where = f"task {task.name!r} ({task.compose_file})"
    main = project.main
    extra = sorted(set(main) - MAIN_KEYS)
    if extra:
        return (f"{where}: its service {MAIN!r} sets {extra}; gymenvs starts the agent's container itself and applies "
                f"only {sorted(MAIN_KEYS - {'command'})} of it")
    if main.get("command") not in (None, _BASE_COMMAND, " ".join(_BASE_COMMAND)):
        return (f"{where}: its service {MAIN!r} sets its own command {main['command']!r}; the agent's container runs "
                "nothing but a keep-alive (as Harbor's `sleep infinity`)")
    if not (task.environment_dir / "Dockerfile").is_file() and not task.config.environment.docker_image:
        return (f"{where}: {MAIN!r} has nothing to run: a compose task needs environment/Dockerfile or "
                "[environment] docker_image for the agent's container")
    own_build = "build" in main and Path(main["build"].get("context", "")) != task.environment_dir.resolve()
    if main.get("image") != _base_image(task) or own_build:
        return f"{where}: its service {MAIN!r} names its own image or build; gymenvs builds {MAIN!r} from environment/"
    own_networks = sorted(name for name, service in project.services.items()
                          if set(service.get("networks") or {"default"}) != {"default"} or "network_mode" in service)
    if own_networks:
        return (f"{where}: the services {own_networks} set their own networks; gymenvs joins the agent's container "
                "to the project's default network only")
    binding = sorted(name for name, service in project.sidecars.items()
                     if any(map(_binds_host_path, service.get("volumes") or ())))
    if binding:
        return (f"{where}: the services {binding} bind-mount host paths, which an engine on another machine does not "
                "have; gymenvs gives sidecars named volumes only")
    return None


def _binds_host_path(volume: Any) -> bool:
    """Whether a service's volume entry, as the compose tool resolves it (long or short syntax), is a host path."""
    if isinstance(volume, Mapping):
        return volume.get("type") == "bind"
    source = str(volume).split(":", 1)[0] if ":" in str(volume) else ""
    return source.startswith(("/", ".", "~"))


def main_environment(task: TerminalTask) -> dict[str, str]:
    """The environment of "main" in the task's compose file ({} for a task without one)."""
    if task.compose_file is None:
        return {}
    environment = read_project(task).main.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(entry.split("=", 1) if "=" in entry else (entry, "") for entry in environment)
    return {str(key): "" if value is None else str(value) for key, value in environment.items()}


def start_sidecars(runtime: Runtime, task: TerminalTask, images: Mapping[str, str], *, episode_id: str,
                   network: bool) -> Sidecars:
    """The task's sidecars, each from its image in `images` (`gymenvs.terminal.images.sidecar_images`), started and
    waited for as "main" depends on them."""
    project = read_project(task)
    with compose_files(task) as files:
        return runtime.start_sidecars(files, project_directory=task.environment_dir, images=images,
                                      wait_for=project.wait_for, episode_id=episode_id, network=network,
                                      volumes=project.volumes, timeout=task.config.environment.build_timeout_sec)


def _base_image(task: TerminalTask) -> str | None:
    return None if (task.environment_dir / "Dockerfile").is_file() else task.config.environment.docker_image


@contextmanager
def compose_files(task: TerminalTask) -> Iterator[list[Path]]:
    """Harbor's order: a base that makes "main" (built from environment/, or the task's docker_image, kept alive),
    then the task's own compose file."""
    assert task.compose_file is not None
    image = _base_image(task)
    main: dict[str, Any] = {"command": _BASE_COMMAND}
    main.update({"image": image} if image else {"build": {"context": str(task.environment_dir.resolve())}})
    with tempfile.TemporaryDirectory(prefix="gymenvs-compose-") as folder:
        base = Path(folder) / "gymenvs-main.json"  # JSON is YAML to the compose tool
        base.write_text(json.dumps({"services": {MAIN: main}}))
        yield [base, task.compose_file]

