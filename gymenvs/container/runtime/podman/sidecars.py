"""Sidecars on Podman: as on Docker (`DockerSidecars`), but gymenvs runs their healthchecks itself while it waits.

Podman 4.3 runs a container's healthcheck from a systemd timer; where the engine has no systemd (a service started
by hand, a CI machine, a container) the timer is never set and a service never turns healthy. Its libpod API runs
a healthcheck on demand and records the result as the timer would, so while the project starts each service with
a healthcheck is checked at its own interval, first one interval after it is seen running, as Docker does.

Podman 4.3's Docker API also splits an exec-form healthcheck's arguments at spaces (`["CMD", "python3", "-c",
"import x; x.y()"]` runs `python3 -c import x; ...`), so such a test is handed to it as the one shell command that
runs the same argv (`CMD-SHELL`, quoted with `shlex.join`): the image needs a `/bin/sh`.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gymenvs.container.runtime.docker.compose import DockerSidecars, compose_config

#: libpod's "run this container's healthcheck now", under a version prefix that Podman 4 and later accept.
_RUN_HEALTHCHECK = "/v4.0.0/libpod/containers/{}/healthcheck"
#: The interval of a healthcheck that names none (Docker's and Podman's default).
_DEFAULT_INTERVAL_S = 30.0


class PodmanSidecars(DockerSidecars):
    """`DockerSidecars` whose healthchecks gymenvs runs (through libpod) while it waits for them."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._next_check: dict[str, float] = {}  # container id -> when its healthcheck is due
        super().__init__(*args, **kwargs)

    def _service_options(self, files: Sequence[Path], project_directory: Path,
                         images: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """Each exec-form healthcheck of the services started, as the shell command that runs the same argv."""
        services = compose_config(files, project_directory=project_directory, engine=self._engine)["services"]
        options = {}
        for name in images:
            test = (services[name].get("healthcheck") or {}).get("test")
            if isinstance(test, list) and test[:1] == ["CMD"]:
                options[name] = {"healthcheck": {"test": ["CMD-SHELL", shlex.join(test[1:])]}}
        return options

    def _states(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        for container in self._containers():
            if self._has_healthcheck(container) and container.attrs["State"].get("Status") == "running":
                due = self._next_check.setdefault(container.id, now + _interval_s(container))
                if now >= due:
                    self._run_healthcheck(container.id)
                    self._next_check[container.id] = time.monotonic() + _interval_s(container)
        return super()._states()  # listed again: a check just run is in it

    @staticmethod
    def _has_healthcheck(container: Any) -> bool:
        test = (container.attrs["Config"].get("Healthcheck") or {}).get("Test") or []
        return bool(test) and test[0] != "NONE"

    def _run_healthcheck(self, container_id: str) -> None:
        """Run it once; the engine records the result in the container's `State.Health`. A container that stopped
        meanwhile answers an error, which the wait reads from its state instead."""
        self._client.api.get(self._client.api.base_url + _RUN_HEALTHCHECK.format(container_id))


def _interval_s(container: Any) -> float:
    nanoseconds = (container.attrs["Config"].get("Healthcheck") or {}).get("Interval") or 0
    return nanoseconds / 1e9 or _DEFAULT_INTERVAL_S
