"""ruff and mypy over the code, with the settings in pyproject.toml, started as soon as the tests are collected so
that they run beside the tests instead of after them (mypy alone takes about 40 s from a cold cache)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: mypy's incremental cache outside the checkout, one per checkout path: a clean checkout (as CI's) then checks
#: only what changed since the last run on this machine (about 6 s instead of about 48 s cold).
MYPY_CACHE = Path.home() / ".cache" / "gymenvs" / "mypy" / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
COMMANDS = {
    "ruff": [sys.executable, "-m", "ruff", "check", "gymenvs", "wrappers", "tests", "examples"],
    "mypy": [sys.executable, "-m", "mypy", "--cache-dir", str(MYPY_CACHE)],
}


def results_folder() -> Path:
    """Where this test run's linters write their output and status: one folder per run, shared by its xdist workers
    (every worker collects every test, and only the first starts the linters; the lint tests may run on another)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
    return Path(tempfile.gettempdir()) / f"gymenvs_lint_{run}"


def start_linters() -> dict[str, subprocess.Popen]:
    """Each linter, started in the background, writing its output to `NAME.out` and then its exit status to
    `NAME.status` in `results_folder()`."""
    for earlier in Path(tempfile.gettempdir()).glob("gymenvs_lint_*"):  # earlier runs' (results are kilobytes)
        if time.time() - earlier.stat().st_mtime > 3600:
            shutil.rmtree(earlier, ignore_errors=True)
    folder = results_folder()
    folder.mkdir(exist_ok=True)
    script = '"$@" > "$0.out" 2>&1; echo $? > "$0.status.part" && mv "$0.status.part" "$0.status"'
    return {name: subprocess.Popen(["sh", "-c", script, str(folder / name), *command], cwd=ROOT, start_new_session=True)
            for name, command in COMMANDS.items()}


def stop(linter: subprocess.Popen) -> None:
    """Kill a linter started by `start_linters`: its shell and the linter under it."""
    try:
        os.killpg(linter.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    linter.wait()


def linter_result(name: str, timeout: float) -> tuple[int, str]:
    """The exit status and output of the linter `name` of this test run, once it has finished."""
    status = results_folder() / f"{name}.status"
    deadline = time.monotonic() + timeout
    while not status.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not finish in {timeout:g} s")
        time.sleep(0.2)
    return int(status.read_text()), (results_folder() / f"{name}.out").read_text()
