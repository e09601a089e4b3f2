"""ruff and mypy over the code (`gymenvs`, `wrappers`; ruff also `tests`, `examples`), with the settings in
pyproject.toml: both clean. They run in the background from the moment the tests are collected
(tests/conftest.py, `lint_support.start_linters`); each test waits for its linter."""

from __future__ import annotations

import pytest
from lint_support import COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_code_is_clean(linters, name):
    output, _ = linters[name].communicate(timeout=600)
    assert linters[name].returncode == 0, output
