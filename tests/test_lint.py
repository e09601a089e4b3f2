"""ruff and mypy over the library (`gymenvs`, `wrappers`), with the settings in pyproject.toml: both clean."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: mypy's incremental cache outside the checkout, one per checkout path: a clean checkout (as CI's) then checks
#: only what changed since the last run on this machine (about 6 s instead of about 48 s cold).
MYPY_CACHE = Path.home() / ".cache" / "gymenvs" / "mypy" / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "gymenvs", "wrappers", "tests", "examples"],
        [sys.executable, "-m", "mypy", "--cache-dir", str(MYPY_CACHE)],
    ],
    ids=["ruff", "mypy"],
)
def test_the_library_is_clean(command):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
