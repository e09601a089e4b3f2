"""Fixture tasks made from a real release: the repo is the sdist of the buggy release.

A row's `upstream` field names what to fetch with pip when its image is built (on the host; the
container has no network), so no third-party source lives in this repository:

    "upstream": {"sdist": "itsdangerous==2.1.0",                      # the repo at /testbed
                 "requires": ["freezegun==1.5.1", ...],                # pure-Python wheels the tests import
                 "import_path": "src"}                                 # put on sys.path (a .pth file)

Downloads are kept in ~/.cache/gymenvs/packages (or $GYMENVS_CACHE/packages).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    root = os.environ.get("GYMENVS_CACHE") or Path.home() / ".cache" / "gymenvs"
    return Path(root) / "packages"


def download(requirement: str, *, sdist: bool) -> Path:
    """The sdist (or wheel) of `requirement` ("name==version"), fetched by pip once."""
    name, _, version = requirement.partition("==")
    if not version:
        raise ValueError(f"upstream requirement {requirement!r}: pin one version, as name==version")
    folder = cache_dir() / ("sdist" if sdist else "wheels")
    found = _find(folder, name, version, sdist)
    if found is None:
        option = "--no-binary" if sdist else "--only-binary"
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", option, ":all:",
                                 "-d", str(folder), requirement], capture_output=True, text=True)
        found = _find(folder, name, version, sdist)
        if found is None:
            raise RuntimeError(f"pip could not download {requirement}: {result.stderr[-2000:]}")
    return found


def _find(folder: Path, name: str, version: str, sdist: bool) -> Path | None:
    suffixes = (".tar.gz", ".zip") if sdist else (".whl",)
    for path in sorted(folder.glob("*")) if folder.is_dir() else ():
        stem = path.name.lower().replace("-", "_")
        if stem.startswith(f"{name.lower().replace('-', '_')}_{version}") and path.name.endswith(suffixes):
            return path
    return None


def context_files(upstream: Mapping[str, Any]) -> dict[str, bytes]:
    """Build-context files: the sdist's tree under repo/, the wheels' trees under deps/."""
    files = {f"repo/{path}": data for path, data in _sdist_tree(download(upstream["sdist"], sdist=True)).items()}
    for requirement in upstream.get("requires", ()):
        with zipfile.ZipFile(download(requirement, sdist=False)) as wheel:
            files.update({f"deps/{info.filename}": wheel.read(info) for info in wheel.infolist() if not info.is_dir()})
    import_path = upstream.get("import_path")
    if import_path:
        files["deps/gymenvs-testbed.pth"] = f"/testbed/{import_path}\n".encode()
    return files


def dockerfile_lines(upstream: Mapping[str, Any]) -> str:
    """Dockerfile lines that install the wheels and the .pth file into the image's site-packages."""
    if not upstream.get("requires") and not upstream.get("import_path"):
        return ""
    return ("COPY deps /tmp/gymenvs-deps\n"
            "RUN cp -r /tmp/gymenvs-deps/. \"$(python3 -c 'import site; print(site.getsitepackages()[0])')\" "
            "&& rm -rf /tmp/gymenvs-deps\n")


def after_commit_lines() -> str:
    """An sdist has no .gitignore: keep byte code out of the agent's diff without changing the tree."""
    return "RUN printf '__pycache__/\\n*.py[co]\\n.pytest_cache/\\n' >> .git/info/exclude\n"


def _sdist_tree(path: Path) -> dict[str, bytes]:
    """{path inside the project: content} of an sdist, its top directory stripped."""
    files = {}
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/", 1)
            extracted = archive.extractfile(member) if member.isfile() else None
            if extracted is not None and len(parts) == 2 and ".." not in parts[1].split("/"):
                files[parts[1]] = extracted.read()
    return dict(sorted(files.items()))

