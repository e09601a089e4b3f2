"""Task images: each Harbor task's `environment/` built once into an image named by its content.

The tag is a digest of every file under `environment/` (path, mode and bytes), so an unchanged task
reuses its image and an edited one gets a new image; nothing is pulled while building (a task built
on the project's base image builds offline). A task whose [environment] names a `docker_image` and
has no Dockerfile runs in that image. Compose environments (a compose file, with or without a Dockerfile
beside it) are refused with a clear error (`ComposeUnsupported`), installed compose tool or not: the sandbox,
the warm pool and the snapshot grading work on one container per episode.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
import threading
from functools import cache

from gymenvs.container.images import ensure_image
from gymenvs.container.runtime import ImageBuildError, Runtime, SandboxError
from gymenvs.terminal.task import DOCKERFILE, TerminalTask

IMAGE_PREFIX = "gymenvs/terminal"
#: Label on every image built here (`docker image prune --filter label=gymenvs.terminal`).
IMAGE_LABEL = "gymenvs.terminal"
_build_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


class ComposeUnsupported(SandboxError):
    """The task's environment is a docker-compose project: gymenvs runs one container per episode."""

    reason = "image_missing"


def image_name(task: TerminalTask) -> str:
    """The image a task runs in: its [environment] docker_image when it has no Dockerfile, else a name
    made of the task's name and the digest of its environment/ folder."""
    if task.environment_kind == "image":
        assert task.config.environment.docker_image is not None  # "image" kind means it is set
        return task.config.environment.docker_image
    slug = re.sub(r"[^a-z0-9._-]+", "-", task.name.lower()).strip("-.") or "task"
    return f"{IMAGE_PREFIX}.{slug}:{environment_digest(task)[:16]}"


def environment_digest(task: TerminalTask) -> str:
    """sha256 of environment/: each file's relative path, executable bit and bytes, in path order."""
    digest = hashlib.sha256()
    root = task.environment_dir
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(b"x" if path.stat().st_mode & 0o111 else b"-")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def ensure_task_image(runtime: Runtime, task: TerminalTask, *, pull: bool = False) -> str:
    """The task's image, built from environment/ unless an image of the same content exists; its name.
    `ImageBuildError` (naming the task) if the build fails or runs past [environment] build_timeout_sec,
    `ComposeUnsupported` for a compose environment, `ImageMissing` for a missing `docker_image` that may
    not (or cannot) be pulled."""
    if task.environment_kind == "compose":
        raise ComposeUnsupported(compose_message(task))
    name = image_name(task)
    if task.environment_kind == "image":
        ensure_image(runtime, name, pull=pull)
        return name
    with _lock_for(name):
        if not runtime.image_exists(name):
            try:
                runtime.build(environment_context(task), name, timeout=task.config.environment.build_timeout_sec,
                              labels={IMAGE_LABEL: "1", f"{IMAGE_LABEL}.task": task.name})
            except ImageBuildError as exc:
                raise ImageBuildError(f"task {task.name!r} ([environment] build_timeout_sec = "
                                      f"{task.config.environment.build_timeout_sec:g}): {exc}") from None
    return name


def environment_context(task: TerminalTask) -> bytes:
    """environment/ as a tar build context, keeping each file's mode."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(task.environment_dir.rglob("*")):
            tar.add(path, arcname=path.relative_to(task.environment_dir).as_posix(), recursive=False)
    return buffer.getvalue()


@cache
def compose_available() -> bool:
    """Whether `docker compose` (or `docker-compose`) answers on this machine."""
    for command in (["docker", "compose", "version"], ["docker-compose", "version"]):
        if shutil.which(command[0]) is None:
            continue
        try:
            if subprocess.run(command, capture_output=True, timeout=20).returncode == 0:
                return True
        except (OSError, subprocess.TimeoutExpired):
            continue
    return False


def compose_message(task: TerminalTask) -> str:
    found = "installed" if compose_available() else "not installed"
    beside = f", over its {DOCKERFILE}," if (task.environment_dir / DOCKERFILE).is_file() else ""
    return (f"task {task.name!r} ({task.path}) defines its environment with docker-compose "
            f"({task.compose_file.name if task.compose_file else 'compose file'}{beside}): gymenvs runs single-container tasks "
            "only (an environment/Dockerfile or [environment] docker_image), since its sandbox, warm pool and snapshot "
            f"grading work on one container per episode (a compose tool is {found} here; that does not change it)")


def _lock_for(name: str) -> threading.Lock:
    with _locks_lock:
        return _build_locks.setdefault(name, threading.Lock())
