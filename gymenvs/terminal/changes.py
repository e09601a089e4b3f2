"""The files an agent changed in its container, kept in the grading report (`HarborOptions.keep_changes`) so that
`gymenvs tasks regrade` can grade the episode again from its trajectory alone, and put back in a fresh container.

At grading (`gymenvs.terminal.grading`), with the agent's container stopped:

1. the engine lists what the container's writable layer added, changed and deleted (`Sandbox.changed_paths`: no
   program of the container takes part), less what grading says is not the agent's work;
2. in the grading container, started from the snapshot of those files and before the tests run, one `tar` reads
   the added and changed paths, a directory as its entry alone (`--no-recursion`: the engine lists what changed in
   it on its own), and the host gzip-compresses its output as it comes (a tool grading put back
   (`gymenvs.terminal.toolguard`) is read as put back);
3. the compressed tar and the deleted paths go in the report (`KeptChanges.to_dict`, `report["changes"]`); past
   the size limit, or if the container cannot run the tar, nothing is kept and the report says why. The episode is
   graded the same either way.

`put_back` makes a fresh container of the task's image hold the files as the agent left them: the deleted paths
deleted, then the tar unpacked by the engine at / (owners, modes and times as they were).
"""

from __future__ import annotations

import base64
import gzip
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gymenvs.container.runtime import Sandbox, SandboxError
from gymenvs.container.runtime.base import TIMEOUT_EXIT_CODES, ChangeKind
from gymenvs.container.runtime.commands import stream_output

#: Seconds the tar of the changed files may take, and their deletion when they are put back.
READ_TIMEOUT_S = 300.0
#: GNU tar reading the NUL-separated paths on its standard input, each as its own entry (a directory without its
#: content); a path gone since (one `toolguard` put back as a directory) is skipped.
_TAR = "tar --create --file=- --no-recursion --ignore-failed-read --null --files-from=-"


@dataclass(frozen=True)
class KeptChanges:
    """What an agent changed in its container's files, as a grading report keeps it (`report["changes"]`)."""

    #: The added and changed paths (a directory without its content) as a gzip-compressed tar, relative to /.
    archive: bytes = b""
    #: The deleted paths.
    deleted: tuple[str, ...] = ()
    #: How many paths the engine listed (added, changed and deleted), and the tar's bytes before compression.
    paths: int = 0
    tar_bytes: int = 0
    #: Why none were kept ("" when they were).
    not_kept: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As the report holds it: the archive in base64, and its size (`bytes`)."""
        return {"archive": base64.b64encode(self.archive).decode("ascii"), "deleted": list(self.deleted),
                "paths": self.paths, "bytes": len(self.archive), "tar_bytes": self.tar_bytes, "not_kept": self.not_kept}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeptChanges:
        return cls(base64.b64decode(data.get("archive", "")), tuple(data.get("deleted", ())), int(data.get("paths", 0)),
                   int(data.get("tar_bytes", 0)), str(data.get("not_kept", "")))


class _NotKept(Exception):
    """Why the changed files cannot be kept."""


class _Compressed:
    """Bytes gzip-compressed as they come; `_NotKept` once the compressed bytes pass `limit`."""

    def __init__(self, limit: int):
        self.limit = limit
        self.raw = 0
        self._compressor = zlib.compressobj(wbits=31)  # the gzip format
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> None:
        self.raw += len(data)
        self._add(self._compressor.compress(data))

    def finish(self) -> bytes:
        self._add(self._compressor.flush())
        return b"".join(self._parts)

    def _add(self, part: bytes) -> None:
        self._size += len(part)
        if self._size > self.limit:
            raise _NotKept(f"the changed files take more than {self.limit} bytes compressed, the limit (changes_limit)")
        self._parts.append(part)


def keep_changes(changes: Mapping[str, ChangeKind], reader: Sandbox, *, limit: int) -> KeptChanges:
    """`changes` (an agent's container's, as the engine listed them), the added and changed paths read from `reader`
    (a container of the same files, where nothing runs yet), unless compressed they take more than `limit` bytes.
    What stops them being kept is `not_kept`, never an exception: the episode is graded all the same."""
    deleted = tuple(sorted(path for path, kind in changes.items() if kind == "deleted"))
    present = sorted(path for path, kind in changes.items() if kind != "deleted")  # a directory before its content
    try:
        archive, tar_bytes = _read_tar(reader, present, limit) if present else (b"", 0)
    except (_NotKept, SandboxError) as exc:
        return KeptChanges(paths=len(changes), not_kept=str(exc))
    return KeptChanges(archive, deleted, len(changes), tar_bytes)


def _read_tar(reader: Sandbox, paths: list[str], limit: int) -> tuple[bytes, int]:
    """`paths` as one tar, compressed as it comes: (the compressed tar, its size before). The list goes in a file of
    `reader` that is gone before tar reads it (its standard input): nothing of it is left for the tests."""
    listing = _staged(reader, paths)
    compressed = _Compressed(limit)
    try:
        status = stream_output(reader, f"{{ rm -f {listing} && exec {_TAR}; }} < {listing}", compressed.feed,
                               timeout=READ_TIMEOUT_S)
    except _NotKept:
        reader.kill_all()  # the tar, blocked on its output (nothing else runs in the grading container yet)
        raise
    if status in (None, *TIMEOUT_EXIT_CODES):
        raise _NotKept(f"tar did not read the changed files in {READ_TIMEOUT_S:g} s")
    if status != 0:
        raise _NotKept(f"tar, reading the changed files in the grading container, exited {status} (it must be GNU tar)")
    return compressed.finish(), compressed.raw


def put_back(sandbox: Sandbox, changes: KeptChanges) -> None:
    """Make `sandbox` (a fresh container of the task's image) hold the files as the agent left them: the deleted
    paths deleted, then the added and changed ones unpacked at /. `SandboxError` if it cannot."""
    if changes.deleted:
        listing = _staged(sandbox, list(changes.deleted))
        result = sandbox.run(f"{{ rm -f {listing} && xargs -0 -r rm -rf --; }} < {listing}", timeout=READ_TIMEOUT_S)
        if result.exit_code != 0:
            raise SandboxError(f"could not delete the paths the agent deleted (exit {result.exit_code}): "
                               f"{result.output.text()[-500:]}")
    if changes.archive:
        sandbox.put_archive("/", gzip.decompress(changes.archive))


def _staged(sandbox: Sandbox, paths: list[str]) -> str:
    """Where `paths` are written, NUL-separated, in `sandbox` (at /, which no change lists: the command reading
    them removes the file)."""
    name = f".gymenvs-paths-{uuid.uuid4().hex[:12]}"
    sandbox.put_files("/", {name: "\0".join(paths).encode("utf-8", "surrogateescape")}, mode=0o600)
    return f"/{name}"
