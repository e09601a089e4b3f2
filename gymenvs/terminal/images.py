"""Task images: each Harbor task's `environment/` built once into an image named by its content.

The tag is a digest of every file under `environment/` (path, mode and bytes) and of the task's container
environment, so an unchanged task reuses its image and an edited one gets a new image; nothing is pulled while
building (a task built on the project's base image builds offline). A task whose [environment] names a
`docker_image` and has no Dockerfile runs in that image. A compose task's agent container is its service
"main", made the same way (`gymenvs.terminal.compose`).

The container environment is [environment] env over the `environment` of a compose file's "main", as Harbor
sets it on the agent's container. It is written into the image (`ENV`), so the agent's commands, its program
and the tests on the graded snapshot all see it.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gymenvs.container.images import ensure_image, pull_from_registry
from gymenvs.container.runtime import ImageBuildError, ImageMissing, Runtime
from gymenvs.terminal.task import DOCKERFILE, TerminalTask

IMAGE_PREFIX = "gymenvs/terminal"
#: Label on every image built here (`docker image prune --filter label=gymenvs.terminal`).
IMAGE_LABEL = "gymenvs.terminal"
_build_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def image_name(task: TerminalTask) -> str:
    """The image a task runs in: its [environment] docker_image when it has no Dockerfile and sets no environment,
    else a name made of the task's name and the digest of its environment/ folder and environment."""
    environment = container_environment(task)
    if not task.has_dockerfile and not environment:
        assert task.config.environment.docker_image is not None  # a task without a Dockerfile has one
        return task.config.environment.docker_image
    return f"{IMAGE_PREFIX}.{slug(task.name)}:{environment_digest(task)[:16]}"


def slug(name: str) -> str:
    """`name` as a part of an image name."""
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "task"


def container_environment(task: TerminalTask) -> dict[str, str]:
    """The environment of the task's agent container: a compose "main"'s, then [environment] env over it."""
    from gymenvs.terminal.compose import main_environment

    return {**main_environment(task), **task.config.environment.env}


def environment_digest(task: TerminalTask) -> str:
    """sha256 of environment/ (`folder_digest`), the base image when there is no Dockerfile, and the environment."""
    digest = hashlib.sha256(folder_digest(task.environment_dir).encode())
    digest.update(json.dumps([task.config.environment.docker_image if not task.has_dockerfile else None,
                              container_environment(task)], sort_keys=True).encode())
    return digest.hexdigest()


def folder_digest(root: Path) -> str:
    """sha256 of a folder: each file's relative path, executable bit and bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(b"x" if path.stat().st_mode & 0o111 else b"-")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def ensure_task_image(runtime: Runtime, task: TerminalTask, *, pull: bool = False, registry: str | None = None) -> str:
    """The task's image, built from environment/ (or its `docker_image` with its environment) unless an image of
    the same content exists; its name. `ImageBuildError` (naming the task) if the build fails or runs past
    [environment] build_timeout_sec, `ImageMissing` for a missing `docker_image` that may not (or cannot) be
    pulled. With `registry`, an image missing here is pulled from there if it has it, and built if not."""
    name = image_name(task)
    base = task.config.environment.docker_image
    if not task.has_dockerfile:
        assert base is not None
        ensure_image(runtime, base, pull=pull, registry=registry)
        if name == base:
            return name
    with build_lock(name):
        if not runtime.image_exists(name) and not _pulled(runtime, name, registry):
            try:
                runtime.build(environment_context(task), name, timeout=task.config.environment.build_timeout_sec,
                              labels={IMAGE_LABEL: "1", f"{IMAGE_LABEL}.task": task.name})
            except ImageBuildError as exc:
                raise ImageBuildError(f"task {task.name!r} ([environment] build_timeout_sec = "
                                      f"{task.config.environment.build_timeout_sec:g}): {exc}") from None
    return name


def _pulled(runtime: Runtime, name: str, registry: str | None) -> bool:
    """Whether `name` could be pulled from `registry` (no registry, or one without it: it is to be built here)."""
    if registry is None:
        return False
    try:
        pull_from_registry(runtime, name, registry)
    except ImageMissing:
        return False
    return True


def environment_context(task: TerminalTask) -> bytes:
    """environment/ as a tar build context, keeping each file's mode, with the container environment added to its
    Dockerfile (or a Dockerfile `FROM` the task's docker_image)."""
    dockerfile = (task.environment_dir / DOCKERFILE).read_text() if task.has_dockerfile else \
        f"FROM {task.config.environment.docker_image}\n"
    environment = container_environment(task)
    if environment:
        dockerfile += "\n" + "".join(f"ENV {key}={_dockerfile_quoted(value)}\n" for key, value in environment.items())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(task.environment_dir.rglob("*")):
            if path != task.environment_dir / DOCKERFILE:
                tar.add(path, arcname=path.relative_to(task.environment_dir).as_posix(), recursive=False)
        data = dockerfile.encode()
        info = tarfile.TarInfo(DOCKERFILE)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _dockerfile_quoted(value: str) -> str:
    """A value as a double-quoted Dockerfile word: no variable is substituted, no character lost."""
    if "\n" in value:
        raise ValueError(f"environment value {value!r}: a value with a line break cannot be written into an image")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def sidecar_images(runtime: Runtime, task: TerminalTask, *, pull: bool = False, registry: str | None = None) -> dict[str, str]:
    """{sidecar: the image it runs} of a compose task, each made present: its `image`, or its `build` built once
    under a name of its content."""
    from gymenvs.terminal.compose import read_project

    return {name: _sidecar_image(runtime, task, name, service, pull=pull, registry=registry)
            for name, service in read_project(task).sidecars.items()}


def _sidecar_image(runtime: Runtime, task: TerminalTask, name: str, service: Mapping[str, Any], *, pull: bool,
                   registry: str | None) -> str:
    build = service.get("build")
    if not build:
        ensure_image(runtime, service["image"], pull=pull, registry=registry,
                     hint=f"it is sidecar {name!r} of task {task.name!r}")
        return service["image"]
    context = Path(build["context"])
    dockerfile = build.get("dockerfile", "Dockerfile")
    digest = hashlib.sha256(f"{folder_digest(context)}\0{dockerfile}\0{json.dumps(build.get('args'), sort_keys=True)}".encode())
    image = f"{IMAGE_PREFIX}.{slug(task.name)}.{slug(name)}:{digest.hexdigest()[:16]}"
    with build_lock(image):
        if not runtime.image_exists(image) and not _pulled(runtime, image, registry):
            try:
                runtime.build(context, image, dockerfile=dockerfile, timeout=task.config.environment.build_timeout_sec,
                              labels={IMAGE_LABEL: "1", f"{IMAGE_LABEL}.task": task.name})
            except ImageBuildError as exc:
                raise ImageBuildError(f"sidecar {name!r} of task {task.name!r}: {exc}") from None
    return image


def build_lock(name: str) -> threading.Lock:
    """The lock that keeps two threads of this process from building the image `name` at once."""
    with _locks_lock:
        return _build_locks.setdefault(name, threading.Lock())
