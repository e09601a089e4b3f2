"""What changed in a repository, read by the Docker engine rather than by tools the agent controls.

The agent is root in its container: it can replace `git`, rewrite `.git/`, or hide files from a
diff tool. So grading never runs a program in the agent's container. It asks the engine which files
of the container's writable layer changed (`Sandbox.changed_paths`), reads them from that layer on this host or
through the engine (`read_files`), and writes them into the fresh grading container, whose tools come untouched from
the task image. There, after any change (copied files or an applied diff), the protected-file policy
(`patches.protected_reason`) is applied to what actually changed on disk, again as the engine sees it.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from gymenvs.container.runtime import Sandbox, SandboxError
from gymenvs.container.runtime.base import ChangeKind
from gymenvs.swe.grading.patches import protected_reason

#: git for grading: hooks, fsmonitor and external diff / textconv programs can run nothing.
TRUSTED_GIT = ("git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.quotePath=false "
               "-c core.fileMode=false -c diff.external= ")
#: Where grading keeps its own files in the grading container: root-only, out of the tests' reach.
STAGING = "/run/gymenvs"
MAX_CHANGED_FILES = 5000
MAX_CHANGED_BYTES = 64 << 20


@dataclass
class DiskChanges:
    """Paths (relative to the repository) that changed on disk, by kind, and the refused ones."""

    changed: dict[str, str] = field(default_factory=dict)  # path -> "changed" | "added" | "deleted"
    #: Writes grading refuses outright (under .git/, or outside the repository), with the reason.
    refused: dict[str, str] = field(default_factory=dict)


def disk_changes(sandbox: Sandbox, workdir: str, before: Set[str] = frozenset()) -> DiskChanges:
    """What changed in `sandbox` since the container started, except the paths in `before`."""
    found = DiskChanges()
    for path, kind in sandbox.changed_paths("/").items():
        if path in before or path == workdir or path == STAGING or path.startswith(STAGING + "/"):
            continue
        if not path.startswith(workdir + "/"):
            if kind != "changed" or not _is_parent_of_any(path, workdir, STAGING):
                found.refused[path] = "outside the repository"
            continue
        relative = path[len(workdir) + 1 :]
        if relative == ".git" or relative.startswith(".git/"):
            found.refused[relative] = "inside .git/"
        else:
            found.changed[relative] = kind
    return found


def copy_changes(source: Sandbox, target: Sandbox, workdir: str, *, changed: dict[str, ChangeKind] | None = None) -> None:
    """Write into `target` what the engine says changed in `source` under `workdir` (`changed`, when it was
    already asked: `source.changed_paths(workdir)`): changed and added files and symbolic links are copied,
    deleted paths are deleted. `.git/`, build artefacts and the paths the repository's .gitignore ignores are
    left out (`enforce_policy` then judges the rest)."""
    changed = source.changed_paths(workdir) if changed is None else changed
    changes = {path[len(workdir) + 1 :]: kind for path, kind in changed.items()}
    changes = {path: kind for path, kind in changes.items() if path != ".git" and not path.startswith(".git/")}
    parents = _parents(changes)
    files = [path for path in changes if path not in parents]
    files = [path for path in files if protected_reason(path) != "build artefact"]
    ignored = ignored_paths(target, workdir, [path for path in files if changes[path] != "deleted"])
    files = [path for path in files if path not in ignored]
    leaves = sorted(path for path in files if changes[path] != "deleted")
    if len(leaves) > MAX_CHANGED_FILES:
        raise SandboxError(f"the agent changed {len(leaves)} files, more than the {MAX_CHANGED_FILES} grading reads")
    fetched = read_files(source, [f"{workdir}/{path}" for path in leaves], MAX_CHANGED_BYTES)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path in leaves:
            if (found := fetched.get(f"{workdir}/{path}")) is None:
                continue  # gone since, or a directory, device or fifo: nothing a diff holds
            member, data = found
            member.name, member.uid, member.gid, member.uname, member.gname = path, 0, 0, "root", "root"
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    # Make room first: a deleted path, and a path whose type changed (a file that became a directory...).
    _run_with_paths(target, workdir, files, 'rm -rf -- "$path"')
    not_a_directory = '[ -e "$path" ] && [ ! -d "$path" ] && rm -f -- "$path"; true'
    _run_with_paths(target, workdir, sorted(parents & set(changes)), not_a_directory)
    if leaves:
        target.put_archive(workdir, archive.getvalue())


def read_files(sandbox: Sandbox, paths: list[str], limit: int) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    """{path: (tar header, content)} of those of `paths` (absolute) that are files or symbolic links in `sandbox`,
    each as `Sandbox.fetch` reads it; `SandboxError` past `limit` bytes of files. Files the sandbox wrote are read from
    its writable layer in one go where the runtime can (`Sandbox.changes_archive`: no engine call), else each through
    the engine (about 0.05 s a file with Docker)."""
    found = _files_from_layer(sandbox, paths, limit)
    if found is not None:
        return found
    found, total = {}, 0
    for path in paths:
        fetched = sandbox.fetch(path)
        if fetched is None or not (fetched[0].isfile() or fetched[0].issym()):
            continue
        total += len(fetched[1])
        if total > limit:
            raise SandboxError(f"the files grading reads exceed {limit >> 20} MiB")
        found[path] = fetched
    return found


def _files_from_layer(sandbox: Sandbox, paths: list[str], limit: int) -> dict[str, tuple[tarfile.TarInfo, bytes]] | None:
    """`read_files` from the sandbox's writable layer; None where the runtime cannot read it, a path is not in it,
    or the files exceed `limit` (the engine then reads them, and says so)."""
    if not paths:
        return {}
    archive = sandbox.changes_archive(paths, limit)
    if archive is None:
        return None
    found = {}
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile() or member.islnk():  # a second name of a file: its content, as the engine reads it
                content = tar.extractfile(member)
                assert content is not None
                data = content.read()
                member.type, member.size, member.linkname = tarfile.REGTYPE, len(data), ""
                found["/" + member.name] = (member, data)
            elif member.issym():
                found["/" + member.name] = (member, b"")
    return found


def ignored_paths(sandbox: Sandbox, workdir: str, paths: list[str]) -> set[str]:
    """Which `paths` the repository's .gitignore rules ignore, asked of the sandbox's (trusted) git."""
    if not paths:
        return set()
    result = _run_with_paths(sandbox, workdir, paths, None, f"{TRUSTED_GIT} check-ignore -z --stdin < {STAGING}/paths")
    return set(result.split("\0")) - {""}


def enforce_policy(sandbox: Sandbox, workdir: str, base_commit: str, changed: dict[str, str],
                   task_test_files: frozenset[str]) -> dict[str, str]:
    """Undo every protected change on disk (back to `base_commit`, or removed if new); return the
    paths whose content really differed (a file rewritten as it was is not reported), with the reason."""
    parents = _parents(changed)
    protected = {path: reason for path in changed if path not in parents and (reason := protected_reason(path, task_test_files))}
    base = shlex.quote(base_commit)
    git = TRUSTED_GIT
    restore = (f'if {git} cat-file -e {base}:"$path" 2>/dev/null; then '
               f'{git} diff --quiet {base} -- "$path" || printf "%s\\0" "$path"; {git} checkout -q {base} -- "$path"; '
               'else { [ -e "$path" ] || [ -L "$path" ]; } && [ ! -d "$path" ] && printf "%s\\0" "$path"; rm -rf -- "$path"; fi')
    differed = _run_with_paths(sandbox, workdir, sorted(protected), restore).split("\0")
    return {path: protected[path] for path in differed if path in protected and protected[path] != "build artefact"}


def _run_with_paths(sandbox: Sandbox, workdir: str, paths: list[str], per_path: str | None, command: str = "") -> str:
    """Run `per_path` for each path (as $path) or `command` in `workdir`, the paths given NUL-separated
    in a staged file (no quoting can go wrong); return the output. `SandboxError` if it fails."""
    if not paths:
        return ""
    sandbox.put_files(STAGING, {"paths": "\0".join(paths).encode("utf-8", "surrogateescape") + b"\0"}, mode=0o600)
    if per_path is not None:
        command = f"while IFS= read -r -d '' path; do {per_path}; done < {STAGING}/paths"
    result = sandbox.run(f"cd {shlex.quote(workdir)} && {command}", timeout=300)
    if result.timed_out or result.exit_code not in (0, 1):  # check-ignore exits 1 when nothing is ignored
        raise SandboxError(f"grading could not update the repository (exit {result.exit_code}): {result.output.text()[-500:]}")
    return result.output.raw().decode("utf-8", "surrogateescape")


def _parents(paths: Iterable[str]) -> set[str]:
    """Every directory that holds one of `paths`."""
    return {str(parent) for path in paths for parent in PurePosixPath(path).parents} - {"."}


def _is_parent_of_any(path: str, *directories: str) -> bool:
    return any(PurePosixPath(directory).is_relative_to(path) for directory in directories)
