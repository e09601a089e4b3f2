"""ruff and mypy over the code (`gymenvs`, `wrappers`; ruff also `tests`, `examples`), with the settings in
pyproject.toml: both clean. They run in the background from the moment the tests are collected
(tests/conftest.py, `lint_support.start_linters`: once per test run, on its first xdist worker); each test waits
for its linter's result, whichever worker runs it."""

from __future__ import annotations

import pytest
from lint_support import COMMANDS, linter_result


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_code_is_clean(name):
    status, output = linter_result(name, timeout=600)
    assert status == 0, output
