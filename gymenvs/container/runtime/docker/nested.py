"""A Docker engine nested in a container of a local one, reached only over TCP: an engine whose files this host
cannot see, to prove and measure that the container envs need nothing but the engine's API
(tests/container/runtime/test_remote_engine.py, examples/benchmarks/remote_engine.py, docs/runtimes.md).

`build_nested_image` adds Debian's docker.io to the base image (`gymenvs.container.images.BASE_IMAGE`) from
this machine's own apt mirror, read at run time. `NestedEngine` runs it: dockerd on tcp://0.0.0.0:2375
without TLS (a test engine on the private bridge: never publish its port), with its own data root (an
anonymous volume, where overlay2 works) and the host's cgroup hierarchies mounted under a cgroup parent of
its own. It is not `privileged`: an engine that itself runs in a container may lack capabilities in its
bounding set (CAP_SYS_RESOURCE on the CI machines), and asking for them all makes every start fail
("unable to apply caps"); it gets all but that one, without seccomp or AppArmor confinement instead.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from gymenvs.container.images import BASE_IMAGE, BASE_SUITE, debian_mirror
from gymenvs.container.runtime.base import SandboxError
from gymenvs.container.runtime.commands import tar_archive
from gymenvs.container.runtime.owners import labels_for

if TYPE_CHECKING:
    from gymenvs.container.runtime.docker import DockerRuntime

NESTED_IMAGE = "gymenvs/nested-docker:bookworm"
NESTED_PORT = 2375
_ROLE = "nested-engine"
_READY_TIMEOUT_S = 90.0
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def build_nested_image(runtime: DockerRuntime, *, mirror: str | None = None, force: bool = False) -> bool:
    """Build `NESTED_IMAGE` on `runtime`'s engine from the base image (which must be there); False if it exists."""
    if runtime.image_exists(NESTED_IMAGE) and not force:
        return False
    mirror = mirror or debian_mirror(BASE_SUITE)
    dockerfile = (f"FROM {BASE_IMAGE}\n"
                  f"RUN echo 'deb {mirror} {BASE_SUITE} main' > /etc/apt/sources.list && rm -f /etc/apt/sources.list.d/* "
                  "&& apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
                  "docker.io iptables && rm -rf /var/lib/apt/lists/*\n")
    runtime.build(tar_archive({"Dockerfile": dockerfile.encode()}), NESTED_IMAGE, network=True)
    return True


class NestedEngine:
    """A nested engine started on `runtime`'s (local) engine from `NESTED_IMAGE`; `url` reaches it. `remove()`
    (or leaving the `with` block) removes it, its data and its cgroups; labelled as this process's, a killed
    process's is reaped as any of its containers."""

    def __init__(self, runtime: DockerRuntime):
        self._runtime = runtime
        self.name = f"gymenvs-{_ROLE}-{uuid.uuid4().hex[:12]}"
        self._cgroup_parent = self.name
        container = runtime.client.containers.run(
            NESTED_IMAGE, ["dockerd", "-H", f"tcp://0.0.0.0:{NESTED_PORT}", "--tls=false", "--storage-driver", "overlay2",
                           "--cgroup-parent", f"/{self._cgroup_parent}"],
            name=self.name, detach=True, labels=labels_for(_ROLE), cap_add=["ALL"], cap_drop=["SYS_RESOURCE"],
            security_opt=["seccomp=unconfined", "apparmor=unconfined"],
            volumes={str(_CGROUP_ROOT): {"bind": str(_CGROUP_ROOT), "mode": "rw"}}, tmpfs={"/run": ""},
            # dockerd's data root: an anonymous volume (overlay2 cannot stack on the container's own overlay)
            mounts=[_anonymous_volume("/var/lib/docker")])
        self._container = container
        container.reload()
        address = container.attrs["NetworkSettings"]["IPAddress"]
        self.url = f"tcp://{address}:{NESTED_PORT}"
        try:
            self._wait_until_ready()
        except BaseException:
            self.remove()
            raise

    def __enter__(self) -> NestedEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()

    def remove(self) -> None:
        """Stop the nested engine (it stops its containers), remove it with its data, then its empty cgroups."""
        try:
            self._container.stop(timeout=20)
        except Exception:  # noqa: BLE001 - gone already: the removal below says so if it matters
            pass
        self._container.remove(v=True, force=True)
        for hierarchy in _CGROUP_ROOT.glob(f"*/{self._cgroup_parent}"):
            for cgroup in sorted((p for p in hierarchy.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                _remove_cgroup(cgroup)
            _remove_cgroup(hierarchy)

    def _wait_until_ready(self) -> None:
        import docker

        deadline = time.monotonic() + _READY_TIMEOUT_S
        while True:
            try:
                docker.DockerClient(base_url=self.url, timeout=5).ping()
                return
            except docker.errors.DockerException as exc:
                self._container.reload()
                if self._container.status != "running" or time.monotonic() > deadline:
                    log = self._container.logs(tail=20).decode(errors="replace")
                    raise SandboxError(f"the nested engine {self.name} did not answer at {self.url} ({exc}); "
                                       f"its log ends with:\n{log}") from None
                time.sleep(0.5)


def _anonymous_volume(target: str):
    import docker

    return docker.types.Mount(target, None, type="volume")


def _remove_cgroup(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:  # not empty (a process still in it) or already gone
        pass
