"""Put back, in the agent's stopped container, the tools the task image had on PATH, before its files
become the snapshot the tests run on.

The tests of a Harbor task run `bash`, `python`, `pytest`, `curl`... from the container the agent
worked in, where the agent was root. A fake `pytest` that exits 0 would pass any test. So, read by
the runtime (`Sandbox.changed_paths` and its file operations; no program of the container runs):

- an entry directly in a PATH directory that the image had, and that the agent changed or deleted,
  is copied back from the image;
- an entry the agent added to a PATH directory, under a name that the image resolves to a later PATH
  directory (a `pytest` in /usr/local/bin in front of /usr/bin/pytest), becomes a symbolic link to
  the image's tool;
- a PATH directory that the agent replaced by another kind of entry (/usr/local/bin a symbolic link
  to its own folder, /bin a real directory) is copied back whole;
- /etc/ld.so.preload (a library loaded into every program) and the test-runner files at / (the one
  parent of /tests: a `/conftest.py` that pytest loads for /tests/test_*.py and that can turn every
  failure into a pass, `/pytest.ini`...) are put back as the image had them, or emptied.

Tools the agent installed under new names stay: installing software is what many tasks ask. What is
not put back (libraries, interpreters' packages, configuration) is listed in docs/terminal-security.md.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from gymenvs.container.runtime import PathStat, Sandbox
from gymenvs.container.runtime.commands import entries_archive

#: Searched for tools even when the image's PATH leaves them out (a test script may set its own PATH).
SYSTEM_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
#: Files that change every program, or every pytest run of /tests, put back as the image had them (or emptied).
GUARDED_FILES = ("/etc/ld.so.preload", "/conftest.py", "/pytest.ini", "/.pytest.ini", "/pytest.toml", "/.pytest.toml",
                 "/pyproject.toml", "/tox.ini", "/setup.cfg")
_DEFAULT_PATH = ":".join(SYSTEM_BIN_DIRS)


def search_path(environment: dict[str, str]) -> list[str]:
    """The PATH directories of an image's `environment`, in order, then the system's binary directories it leaves out."""
    path = environment.get("PATH", _DEFAULT_PATH)
    directories = [posixpath.normpath(d) for d in path.split(":") if d.startswith("/")]
    return list(dict.fromkeys([*directories, *SYSTEM_BIN_DIRS]))


def restore_tools(agent: Sandbox, changes: Mapping[str, str]) -> list[str]:
    """Undo, in the stopped container `agent`, what the agent did to its image's tools (see the module
    docstring), given what the engine lists as changed in it (`agent.changed_paths("/")`); what was put back, one
    line per entry."""
    directories = search_path(dict(agent.runtime.image_config(agent.image).environment))
    touched = [p for p in changes if p in directories or posixpath.dirname(p) in directories or p in GUARDED_FILES]
    if not touched:
        return []
    pristine = agent.runtime.create(agent.image, role="pristine")
    try:
        guard = _Guard(agent, pristine, directories)
        return guard.directories(changes) + guard.entries(changes) + guard.files(changes)
    finally:
        pristine.remove()


class _Guard:
    def __init__(self, agent: Sandbox, pristine: Sandbox, directories: list[str]):
        self.agent, self.pristine, self.path = agent, pristine, directories

    def directories(self, changes: Mapping[str, str]) -> list[str]:
        """PATH directories the agent replaced by another kind of entry, copied back whole."""
        notes = []
        for directory in self.path:
            before = self.pristine.stat(directory) if directory in changes else None
            if before is None:
                continue  # untouched, or a directory the agent added: its entries are judged one by one
            after = self.agent.stat(directory)
            if after is None or after.kind != before.kind or after.link_target != before.link_target:
                self._copy_back(directory)
                now = after.kind if after else "deleted"
                notes.append(f"{directory}: a {now} entry where the image has a {before.kind}, restored")
        return notes

    def entries(self, changes: Mapping[str, str]) -> list[str]:
        """Tools the agent changed, deleted or shadowed, put back."""
        notes = []
        for path, kind in sorted(changes.items()):
            parent = posixpath.dirname(path)
            if parent not in self.path or path in self.path:
                continue
            if kind == "added":
                original = self._resolve(posixpath.basename(path))
                if original is not None and self.path.index(parent) < self.path.index(posixpath.dirname(original)):
                    self.agent.put_archive(parent, entries_archive([(posixpath.basename(path), "symlink", original)]))
                    notes.append(f"{path}: added in front of the image's {original}, now a link to it")
                continue
            before = self.pristine.stat(path)
            if before is not None and before.kind != "dir":
                self._copy_back(path)
                notes.append(f"{path}: {kind} by the agent, restored")
        return notes

    def files(self, changes: Mapping[str, str]) -> list[str]:
        notes = []
        for path in GUARDED_FILES:
            if path not in changes:
                continue
            in_image = self.pristine.stat(path) is not None
            if in_image:
                self._copy_back(path)
            else:
                empty = entries_archive([(posixpath.basename(path), "file", b"")])
                self.agent.put_archive(posixpath.dirname(path), empty)
            notes.append(f"{path}: {changes[path]} by the agent, {'restored' if in_image else 'emptied'}")
        return notes

    def _resolve(self, name: str) -> str | None:
        """Where the image finds the tool `name` on PATH, or None."""
        for directory in self.path:
            found: PathStat | None = self.pristine.stat(f"{directory}/{name}")
            if found is not None and found.kind != "dir":
                return f"{directory}/{name}"
        return None

    def _copy_back(self, path: str) -> None:
        self.agent.put_archive(posixpath.dirname(path), self.pristine.read_archive(path))
