"""Sidecars on Docker: the services of a compose project beside an episode's sandbox, run by the engine's own
compose tool (`docker compose`, or Debian's `docker-compose`).

gymenvs adds one override file to the project's. It labels every container, the project's network and its
volumes as this process's, so that `DockerRuntime.reap` and the exit sweep find what a killed process left. It
names the image each service runs (built or checked beforehand: nothing is pulled or built here). And it makes
the network internal when the task has no internet. The agent's sandbox then joins that network under the
alias "main" (`Limits.network_name`), as the project's own main service would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from gymenvs.container.runtime.base import SandboxError
from gymenvs.container.runtime.owners import LABEL_EPISODE, labels_for

_PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
_ROLE = "sidecar"
_POLL_S = 0.2
#: Seconds a compose command may take (pulling nothing, building nothing).
_COMMAND_TIMEOUT_S = 300.0


@cache
def compose_command() -> tuple[str, ...]:
    """The engine's compose tool: the `docker compose` plugin, else `docker-compose`; `SandboxError` if neither."""
    for command in (("docker", "compose"), ("docker-compose",)):
        if shutil.which(command[0]) is None:
            continue
        try:
            if subprocess.run([*command, "version"], capture_output=True, timeout=30).returncode == 0:
                return command
        except (OSError, subprocess.TimeoutExpired):
            continue
    raise SandboxError("a compose task needs the engine's compose tool, and neither `docker compose` nor "
                       "`docker-compose` answers here (Debian: apt-get install docker-compose)")


def run_compose(arguments: Sequence[str], *, engine: str | None, what: str) -> str:
    """Run the compose tool against `engine` (None: the environment's); its output, or `SandboxError` naming
    `what` with the tool's last lines."""
    environment = {**os.environ, **({"DOCKER_HOST": engine} if engine else {})}
    try:
        done = subprocess.run([*compose_command(), *arguments], capture_output=True, text=True, env=environment,
                              timeout=_COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{what}: the compose tool did not finish in {_COMMAND_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
        raise SandboxError(f"{what}: {tail}")
    return done.stdout


def file_arguments(files: Sequence[Path], project_directory: Path) -> list[str]:
    return ["--project-directory", str(project_directory), *(part for f in files for part in ("-f", str(f)))]


def compose_config(files: Sequence[Path], *, project_directory: Path, engine: str | None) -> dict[str, Any]:
    """The project as the compose tool resolves it (files merged in order, variables substituted)."""
    import yaml

    text = run_compose([*file_arguments(files, project_directory), "config"], engine=engine,
                       what=f"the compose files {[f.name for f in files]} are not a valid project")
    return yaml.safe_load(text) or {}


class DockerSidecars:
    """The services `images` names of a compose project, started on the project's own network
    (`DockerRuntime.start_sidecars`); `remove()` removes their containers, volumes and network."""

    def __init__(self, client: Any, engine: str | None, files: Sequence[Path], *, project_directory: Path,
                 images: Mapping[str, str], wait_for: Mapping[str, str], episode_id: str, network: bool,
                 volumes: Sequence[str], timeout: float):
        self._client = client
        self._engine = engine
        self.project = f"gymenvs-{uuid.uuid4().hex[:12]}"
        self.network = f"{self.project}_default"
        self.names: list[str] = []
        labels = labels_for(_ROLE, **{LABEL_EPISODE: episode_id})
        with tempfile.TemporaryDirectory(prefix="gymenvs-compose-") as folder:
            override = Path(folder) / "gymenvs-override.json"  # JSON is YAML: the tool reads it as one more file
            options = self._service_options(files, project_directory, images)
            override.write_text(json.dumps(_override(images, labels, network, volumes, options)))
            try:
                run_compose([*file_arguments([*files, override], project_directory), "--project-name", self.project,
                             "up", "--detach", "--no-build", "--no-deps", *images], engine=engine,
                            what=f"the sidecars {sorted(images)} did not start")
                self.names = [c.name for c in self._containers()]
                self._wait(wait_for, time.monotonic() + timeout)
            except BaseException:
                self.remove()
                raise

    def _service_options(self, files: Sequence[Path], project_directory: Path,
                         images: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """What the override file sets of each service beyond its image and labels, for this engine: nothing."""
        return {}

    def _containers(self) -> list[Any]:
        return self._client.containers.list(all=True, filters={"label": f"{_PROJECT_LABEL}={self.project}"})

    def _states(self) -> dict[str, dict[str, Any]]:
        """Each service's container state (the engine's inspect `State`), by service name."""
        return {c.labels.get(SERVICE_LABEL): c.attrs["State"] for c in self._containers()}

    def _wait(self, wait_for: Mapping[str, str], deadline: float) -> None:
        """Poll until each service meets its condition, as compose's `depends_on` means it."""
        pending = {name: condition for name, condition in wait_for.items() if condition != "service_started"}
        while pending:
            states = self._states()
            for name, condition in list(pending.items()):
                state = states.get(name, {})
                if condition == "service_healthy" and state.get("Health", {}).get("Status") == "healthy":
                    del pending[name]
                elif condition == "service_completed_successfully" and state.get("Status") == "exited":
                    if state.get("ExitCode") != 0:
                        raise SandboxError(f"sidecar {name!r} exited {state.get('ExitCode')} (main depends on it "
                                           f"completing successfully)")
                    del pending[name]
                elif state.get("Status") in ("exited", "dead") and condition == "service_healthy":
                    raise SandboxError(f"sidecar {name!r} exited {state.get('ExitCode')} before it was healthy")
            if pending and time.monotonic() > deadline:
                raise SandboxError(f"sidecars not ready in time: {', '.join(f'{n} ({c})' for n, c in pending.items())}")
            if pending:
                time.sleep(_POLL_S)

    def remove(self) -> None:
        """Remove the containers, then the project's volumes and network (idempotent, best effort)."""
        project = {"label": f"{_PROJECT_LABEL}={self.project}"}
        try:
            for container in self._containers():
                self._client.api.remove_container(container.id, force=True, v=True)
            for volume in self._client.volumes.list(filters=project):
                volume.remove(force=True)
            for network in self._client.networks.list(filters=project):
                network.reload()
                for container in network.containers:  # the agent's, if its removal is still under way
                    network.disconnect(container, force=True)
                network.remove()
        except Exception:  # the engine is gone, or a removal raced: labelled, so a later reap finds the rest
            pass


def _override(images: Mapping[str, str], labels: Mapping[str, str], network: bool, volumes: Sequence[str],
              options: Mapping[str, Mapping[str, Any]]) -> dict:
    """gymenvs' own compose file: the images, the owner labels, the network's reach, and the engine's `options`."""
    override: dict[str, Any] = {
        "services": {name: {**options.get(name, {}), "image": image, "labels": dict(labels)}
                     for name, image in images.items()},
        "networks": {"default": {"internal": not network, "labels": dict(labels)}},
    }
    if volumes:
        override["volumes"] = {name: {"labels": dict(labels)} for name in volumes}
    return override
