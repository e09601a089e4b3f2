"""Unified diffs split per file, and the agent's changes that grading must not apply.

Grading applies the agent's diff minus every change that could decide the test outcome instead of
the code: test files, files the task's `test_patch` touches, `conftest.py`, pytest configuration,
Python start-up hooks, and build artefacts. What was dropped is reported, never silently lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

_FILE_START = re.compile(r"^diff --git ", re.MULTILINE)
_PREFIXED_PATH = re.compile(r"^(?:---|\+\+\+) (.*)$", re.MULTILINE)  # --- a/x, +++ b/x
_PLAIN_PATH = re.compile(r"^(?:rename|copy) (?:from|to) (.*)$", re.MULTILINE)
_HUNKS = re.compile(r"^(?:@@|GIT binary patch)", re.MULTILINE)
_TEST_DIRS = frozenset({"test", "tests"})
_PYTEST_CONFIG = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg",
                            "pyproject.toml"})
_STARTUP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
_ARTEFACT_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".eggs"})
#: Installed-package metadata: an entry_points.txt there could register a pytest plugin.
_METADATA_SUFFIXES = (".egg-info", ".dist-info")


@dataclass(frozen=True)
class FilePatch:
    """The part of a diff that changes one file (or renames / copies it)."""

    paths: tuple[str, ...]
    text: str


def split_diff(diff: str) -> list[FilePatch]:
    """The per-file sections of a `git diff` (text before the first `diff --git` line is dropped)."""
    starts = [m.start() for m in _FILE_START.finditer(diff)]
    sections = [diff[a:b] for a, b in zip(starts, [*starts[1:], len(diff)])]
    return [FilePatch(_section_paths(section), section) for section in sections]


def protected_reason(path: str, task_test_files: frozenset[str] = frozenset()) -> str | None:
    """Why grading ignores the agent's change to `path`, or None if it applies it."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    if path in task_test_files:
        return "touched by the task's test patch"
    if name in _PYTEST_CONFIG:
        return "pytest configuration"
    if name in _STARTUP_HOOKS or name.endswith(".pth"):
        return "Python start-up hook"
    if _TEST_DIRS & set(parts[:-1]) or is_test_file_name(name):
        return "test file"
    if _ARTEFACT_DIRS & set(parts[:-1]) or name.endswith((".pyc", ".pyo")):
        return "build artefact"
    if any(part.endswith(_METADATA_SUFFIXES) for part in parts):
        return "package metadata"
    return None


def is_test_file_name(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py") or name in ("tests.py", "test.py"))


def filter_diff(diff: str, task_test_files: frozenset[str] = frozenset()) -> tuple[str, dict[str, str]]:
    """The diff without its protected files, and each dropped path with the reason."""
    kept, dropped = [], {}
    for section in split_diff(diff):
        reasons = {path: reason for path in section.paths if (reason := protected_reason(path, task_test_files))}
        if reasons:
            dropped.update(reasons)
        else:
            kept.append(section.text)
    return "".join(kept), dropped


def _section_paths(section: str) -> tuple[str, ...]:
    """Paths named in a section's header lines (never in its hunks, where "--- " may be content)."""
    hunks = _HUNKS.search(section)
    header = section[: hunks.start()] if hunks else section
    first_line = header.split("\n", 1)[0][len("diff --git ") :]
    paths = [_strip_prefix(_unquote(p)) for p in _header_paths(first_line)]
    paths += [_strip_prefix(_unquote(p.rstrip("\t"))) for p in _PREFIXED_PATH.findall(header) if p.strip() != "/dev/null"]
    paths += [_unquote(p) for p in _PLAIN_PATH.findall(header)]
    return tuple(dict.fromkeys(p for p in paths if p))


def _header_paths(header: str) -> list[str]:
    """`a/x b/x` -> both paths; git quotes paths holding special characters ("a/x y")."""
    if header.startswith('"'):
        first_end = _quoted_end(header)
        return [header[: first_end + 1], header[first_end + 2 :]]
    if header.endswith('"'):
        second = header.rindex(' "')
        return [header[:second], header[second + 1 :]]
    middle = header.find(" b/")
    return [header[:middle], header[middle + 1 :]] if middle >= 0 else [header]


def _quoted_end(text: str) -> int:
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return len(text) - 1


def _unquote(path: str) -> str:
    """A path as git prints it: plain, or C-quoted with octal escapes for non-ASCII bytes."""
    path = path.strip()
    if not (len(path) >= 2 and path[0] == path[-1] == '"'):
        return path
    raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    return raw.decode("utf-8", "replace")


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path
