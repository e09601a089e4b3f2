"""Collections of Harbor tasks: a folder of task folders, an archive of one, or a dataset of them.

`load_terminal_tasks(source)` reads:

- `"fixtures"`: the tasks shipped with gymenvs (gymenvs/terminal/fixtures);
- a task folder (with task.toml), or a folder holding task folders at any depth (`*/task.toml`,
  as Harbor datasets and Terminal-Bench 2 lay them out);
- an archive of such a folder (.tar.gz, .tgz, .tar, .tar.bz2, .tar.xz, .zip), unpacked once into
  the cache (~/.cache/gymenvs/terminal, or $GYMENVS_CACHE/terminal), keyed by its digest;
- a dataset of task folders read with `datasets` (a local .json/.jsonl/.parquet file, or a Hub
  dataset name) whose rows are the task files: one row per file, with the columns `task` (the
  task folder's name), `path` (the file's path inside it) and `content` (text or bytes), and
  optionally `mode` (e.g. 0o755); `task_rows` writes a folder in this form;
- a Hub dataset repository (a name that is no local path): downloaded once with `huggingface_hub`,
  read as a folder if it holds task folders (at any depth, as Harbor's `hash/task/` layout), else as
  the rows form from its data files. A name that is no repository is a ValueError; network and
  authorisation errors are not caught.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import threading
import zipfile
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from gymenvs.terminal.task import CONFIG, TerminalTask

FIXTURES = "fixtures"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz", ".zip")
ROW_SUFFIXES = (".json", ".jsonl", ".parquet")
ROW_COLUMNS = ("task", "path", "content")


def fixtures_path() -> Path:
    """The folder of the task folders shipped with gymenvs."""
    return Path(str(resources.files("gymenvs.terminal").joinpath("fixtures")))


def cache_root() -> Path:
    root = os.environ.get("GYMENVS_CACHE") or Path.home() / ".cache" / "gymenvs"
    return Path(root) / "terminal"


def load_terminal_tasks(source: str | os.PathLike[str] = FIXTURES, *, split: str | None = None) -> tuple[TerminalTask, ...]:
    """Every task of `source` (see the module docstring), in name order; ValueError naming a malformed task,
    two tasks of one name, or a source that holds none."""
    with _LOADING:  # threads loading at once would unpack one archive (or call `datasets`) together
        return _load_cached(str(source), split)


_LOADING = threading.Lock()


@cache
def _load_cached(source: str, split: str | None) -> tuple[TerminalTask, ...]:
    tasks = tuple(sorted((TerminalTask.from_dir(folder) for folder in task_folders(resolve_source(source, split))),
                         key=lambda task: task.name))
    if not tasks:
        raise ValueError(f"{source!r} holds no Harbor task (no */{CONFIG} in it)")
    names = [task.name for task in tasks]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"{source!r} holds tasks of the same name twice: {twice}")
    return tasks


def resolve_source(source: str, split: str | None = None) -> Path:
    """The local folder `source` stands for (unpacking or materialising it into the cache if needed)."""
    if source == FIXTURES:
        return fixtures_path()
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.name.endswith(ARCHIVE_SUFFIXES):
        if not path.is_file():
            raise ValueError(f"archive {str(path)!r} does not exist")
        return unpack_archive(path)
    if path.suffix in ROW_SUFFIXES or path.exists():
        if not path.is_file():
            raise ValueError(f"dataset file {str(path)!r} does not exist")
        return materialise_rows(str(path), split)
    return hub_dataset(source, split)


def task_folders(root: Path) -> list[Path]:
    """`root` if it is a task folder, else every task folder under it (hidden folders skipped)."""
    if (root / CONFIG).is_file():
        return [root]
    return sorted(config.parent for config in root.rglob(CONFIG)
                  if not any(part.startswith(".") for part in config.relative_to(root).parts))


def unpack_archive(archive: Path) -> Path:
    """The archive's content, unpacked once into the cache; members leaving the folder are refused."""
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:24]
    target = cache_root() / "archives" / digest
    if (target / ".complete").exists():
        return target
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                for member in zipped.namelist():
                    _safe_relative(member, archive)
                zipped.extractall(partial)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(partial, filter="data")  # refuses absolute paths, "..", links out, devices
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise ValueError(f"archive {str(archive)!r} cannot be unpacked: {exc}") from None
    (partial / ".complete").touch()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def materialise_rows(source: str, split: str | None, rows: Any = None) -> Path:
    """A dataset whose rows are task files (`task`, `path`, `content`[, `mode`]) written out as task folders
    in the cache (`rows`: already loaded); ValueError naming the missing columns or a path leaving its task folder."""
    from gymenvs.container.datasets import load_rows

    rows = load_rows(source, split) if rows is None else rows
    columns = list(getattr(rows, "column_names", None) or (rows[0].keys() if len(rows) else []))
    missing = [c for c in ROW_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"dataset {source!r} lacks the column(s) {missing}: a dataset of task folders has one row per "
                         f"file with the columns {list(ROW_COLUMNS)} (and optionally 'mode')")
    key = hashlib.sha256(f"{source}\0{split}\0{getattr(rows, '_fingerprint', '')}".encode()).hexdigest()[:24]
    target = cache_root() / "datasets" / key
    shutil.rmtree(target, ignore_errors=True)  # rows carry no digest to trust an old copy by: write them anew
    for i, row in enumerate(rows):
        _write_row(target, row, f"{source} row {i}")
    target.mkdir(parents=True, exist_ok=True)
    return target


def task_rows(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a dataset of task folders (the form `load_terminal_tasks` reads) for the tasks under `root`."""
    rows = []
    base = Path(root)
    for folder in task_folders(base):
        name = folder.relative_to(base).as_posix() if folder != base else folder.name
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rows.append({"task": name, "path": path.relative_to(folder).as_posix(), "content": path.read_bytes(),
                         "mode": path.stat().st_mode & 0o777})
    return rows


def _write_row(target: Path, row: Mapping[str, Any], where: str) -> None:
    task = _safe_relative(str(row["task"]), where)
    relative = _safe_relative(str(row["path"]), where)
    content = row["content"]
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    path = target / task / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    mode = row.get("mode")
    path.chmod(int(mode) if mode is not None else (0o755 if path.suffix == ".sh" else 0o644))


def _safe_relative(name: str, where: Any) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{where}: path {name!r} leaves its folder")
    return path


def hub_dataset(name: str, split: str | None) -> Path:
    """A Hub dataset repository, downloaded once: read as a folder of task folders if it holds any (at any
    depth, as Harbor's `hash/task/` layout), else its data files as the rows form. A name that is no
    repository is a ValueError; network and authorisation errors (a gated repository) go through as they are."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id=name, repo_type="dataset"))
    except GatedRepoError:  # a subclass of RepositoryNotFoundError: the repository exists, access is refused
        raise
    except RepositoryNotFoundError:
        raise ValueError(f"{name!r} is no local folder, archive or dataset file, and no dataset repository on the Hub "
                         "(for a private one, log in or set HF_TOKEN)") from None
    if task_folders(folder):
        return folder
    return materialise_rows(name, split, rows=load_downloaded_rows(folder, name, split))


def load_downloaded_rows(folder: Path, name: str, split: str | None) -> Any:
    """The rows of a downloaded dataset repository, read by `datasets` from its files (no second download)."""
    import datasets

    from gymenvs.container.datasets import default_split

    loaded = datasets.load_dataset(str(folder), split=split) if split else datasets.load_dataset(str(folder))
    return default_split(loaded, name) if isinstance(loaded, datasets.DatasetDict) else loaded
