"""ruff and mypy over the code, with the settings in pyproject.toml, started as soon as the tests are collected so
that they run beside the tests instead of after them (mypy alone takes about 40 s from a cold cache)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: mypy's incremental cache outside the checkout, one per checkout path: a clean checkout (as CI's) then checks
#: only what changed since the last run on this machine (about 6 s instead of about 48 s cold).
MYPY_CACHE = Path.home() / ".cache" / "gymenvs" / "mypy" / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
COMMANDS = {
    "ruff": [sys.executable, "-m", "ruff", "check", "gymenvs", "wrappers", "tests", "examples"],
    "mypy": [sys.executable, "-m", "mypy", "--cache-dir", str(MYPY_CACHE)],
}


def start_linters() -> dict[str, subprocess.Popen]:
    """Each linter, started in the background with its output captured."""
    return {name: subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for name, command in COMMANDS.items()}
