"""What grading asks of the Docker engine directly, with no program of a container running: stop a
container, look at one path's kind and size, copy one entry between containers, write entries."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
from dataclasses import dataclass
from typing import Any

from gymenvs.swe.sandbox.base import SandboxError

# Go's os.FileMode bits, as the engine reports a path's mode.
_MODE_DIR = 1 << 31
_MODE_SYMLINK = 1 << 27
_MODE_IRREGULAR = (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)  # device, pipe, socket, char device, irregular


@dataclass(frozen=True)
class PathStat:
    """One path of a container as the engine sees it (the last component is not followed)."""

    kind: str  # "dir", "symlink", "file" or "other"
    size: int
    link_target: str = ""


def path_stat(api: Any, container_id: str, path: str) -> PathStat | None:
    """The kind and size of `path` in the container (running or not), or None if it does not exist."""
    import docker

    try:
        response = api.head(api._url("/containers/{0}/archive", container_id), params={"path": path})
        if response.status_code == 404:
            return None
        api._raise_for_status(response)
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        raise SandboxError(f"could not stat {path} in container {container_id[:12]}: {exc}") from None
    stat = json.loads(base64.b64decode(response.headers["X-Docker-Container-Path-Stat"]))
    mode = int(stat.get("mode", 0))
    kind = ("dir" if mode & _MODE_DIR else "symlink" if mode & _MODE_SYMLINK
            else "other" if mode & _MODE_IRREGULAR else "file")
    return PathStat(kind, int(stat.get("size", 0)), stat.get("linkTarget", ""))


def stop_container(api: Any, container_id: str) -> None:
    """SIGKILL the container's init: the kernel then kills every process of its pid namespace, double-forked
    daemons included, and no program of the container takes part. A container already stopped is fine."""
    import docker

    try:
        api.kill(container_id)
    except docker.errors.APIError as exc:
        if "is not running" not in str(exc) and getattr(exc, "status_code", None) != 409:
            raise SandboxError(f"could not stop container {container_id[:12]}: {exc.explanation or exc}") from None
    try:
        api.wait(container_id, timeout=60)
    except Exception as exc:
        raise SandboxError(f"container {container_id[:12]} did not stop: {exc}") from None


def read_entry(api: Any, container_id: str, path: str) -> bytes:
    """The tar archive of `path` (a file, a symbolic link or a whole directory) as the engine reads it."""
    try:
        chunks, _ = api.get_archive(container_id, path)
        return b"".join(chunks)
    except Exception as exc:
        raise SandboxError(f"could not read {path} from container {container_id[:12]}: {exc}") from None


def write_archive(api: Any, container_id: str, directory: str, archive: bytes) -> None:
    """Unpack `archive` under `directory` of the container (running or stopped). The engine replaces an
    existing entry of another kind (a symbolic link where the archive has a directory, say) outright."""
    try:
        ok = api.put_archive(container_id, directory, archive)
    except Exception as exc:
        raise SandboxError(f"could not write under {directory} of container {container_id[:12]}: {exc}") from None
    if not ok:
        raise SandboxError(f"could not write under {directory} of container {container_id[:12]}")


def entries_archive(entries: list[tuple[str, str, str | bytes]]) -> bytes:
    """A tar of (path, kind, payload) entries, kind "dir" (payload ignored), "symlink" (payload: its
    target) or "file" (payload: its bytes, mode 0644), owned by root and stamped now."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, kind, payload in entries:
            info = tarfile.TarInfo(name.lstrip("/"))
            info.mtime, info.uid, info.gid = int(time.time()), 0, 0
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(payload)
                tar.addfile(info)
            else:
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()
