"""The container a Harbor task's tests run in (the verifier): fresh volumes over /logs/verifier and /tests, the task's
tests in /tests, the task's resources and its verifier's network.

Grading starts one from the snapshot of the agent's container (`gymenvs.terminal.grading`), or, where the runtime
can hand the agent's changes over as an archive, one started from the task's image while the agent works
(`VerifierAhead`, the family's `grade_ahead`), into which grading copies those changes.
"""

from __future__ import annotations

import dataclasses
import io
import tarfile
import uuid
from dataclasses import dataclass, field
from typing import Any

from gymenvs.container.family import GradingAhead
from gymenvs.container.runtime import Limits, Runtime, Sandbox
from gymenvs.terminal.task import TerminalTask

VERIFIER_DIR = "/logs/verifier"
TESTS_DIR = "/tests"
ROLE = "verifier"


@dataclass
class Verifier:
    """A grading container and the volumes it mounts, removed together by `remove`."""

    runtime: Runtime
    volumes: list[str] = field(default_factory=list)
    #: The /logs/verifier volume's directory on this host, where the runtime gives one (`Runtime.volume_directory`).
    logs_directory: str | None = None
    sandbox: Sandbox | None = None

    @classmethod
    def start(cls, runtime: Runtime, image: str, task: TerminalTask, *, limits: Limits, workdir: str,
              nonce: str) -> Verifier:
        """A container of `image` for `task`'s tests, under the agent's `limits` with the task's resources and its
        verifier's network. The tests are written into their volume on this host before it starts where the runtime
        allows (`volume_directory`), else through the engine once it runs."""
        verifier = cls(runtime)
        try:
            logs = verifier._volume(f"gymenvs-terminal-{nonce}-logs")
            tests = verifier._volume(f"gymenvs-terminal-{nonce}-tests")
            verifier.logs_directory = runtime.volume_directory(logs)
            archive = tests_archive(task)
            tests_directory = runtime.volume_directory(tests)
            written = tests_directory is not None and unpack_on_host(archive, tests_directory)
            verifier.sandbox = sandbox = runtime.start(
                image, role=ROLE, episode_id=task.name, limits=verifier_limits(task, limits), workdir=workdir,
                volumes={logs: VERIFIER_DIR, tests: TESTS_DIR})
            if not written:
                sandbox.put_archive(TESTS_DIR, archive)
        except BaseException:
            verifier.remove()
            raise
        return verifier

    def _volume(self, name: str) -> str:
        self.volumes.append(self.runtime.create_volume(name, role=ROLE))
        return self.volumes[-1]

    def remove(self) -> None:
        """Remove the container, then its volumes (best effort, idempotent)."""
        if self.sandbox is not None:
            self.sandbox.remove()
        for name in self.volumes:
            self.runtime.remove_volume(name)
        self.volumes = []


class VerifierAhead(GradingAhead):
    """A verifier of the task's image, started while the agent works (`HarborFamily.grade_ahead`)."""

    def __init__(self, verifier: Verifier):
        self.verifier = verifier

    @classmethod
    def start(cls, runtime: Runtime, image: str, task: TerminalTask, *, limits: Limits, workdir: str) -> VerifierAhead:
        return cls(Verifier.start(runtime, image, task, limits=limits, workdir=workdir, nonce=uuid.uuid4().hex[:12]))

    def discard(self) -> None:
        self.verifier.remove()


def verifier_limits(task: TerminalTask, agent_limits: Limits) -> Limits:
    """The agent's limits with the task's cpus, memory and storage, and its verifier's network."""
    environment = task.config.environment
    return dataclasses.replace(agent_limits, cpus=environment.cpus, mem_limit=f"{environment.memory_mb}m",
                               disk_limit=environment.storage_mb << 20, **network_limits(*task.config.verifier_network))


def network_limits(mode: str, hosts: tuple[str, ...] = ()) -> dict[str, Any]:
    """The `Limits` fields of a Harbor network mode: "public" the network, "allowlist" only `hosts`, else none."""
    return {"network": mode in ("public", "allowlist"), "allowed_hosts": hosts if mode == "allowlist" else None}


def tests_archive(task: TerminalTask) -> bytes:
    """The task's tests/ folder (a step's view: the step's tests/ over it), read on the host, as a tar owned by
    root (test.sh executable)."""
    archive = io.BytesIO()

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=archive, mode="w") as tar:
        for folder in task.test_folders:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=path.name, filter=owned_by_root)
    return archive.getvalue()


def unpack_on_host(archive: bytes, directory: str) -> bool:
    """Unpack the tar `archive` (the tests') into `directory` of this host, owned as its members say; False, and
    perhaps part of it unpacked, if a link in it would reach outside `directory` (the engine's `put_archive` keeps
    such a link inside the container instead)."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        try:
            tar.extractall(directory, numeric_owner=True, filter="tar")
        except tarfile.FilterError:
            return False
    return True
