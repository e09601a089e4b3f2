"""ruff and mypy over the library (`gymenvs`, `wrappers`), with the settings in pyproject.toml: both clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "ruff", "check", "gymenvs", "wrappers", "tests", "examples"],
        [sys.executable, "-m", "mypy"],
    ],
    ids=["ruff", "mypy"],
)
def test_the_library_is_clean(command):
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
