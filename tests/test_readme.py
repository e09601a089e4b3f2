"""The Python examples in the README and in docs/ run as written.

A block that starts with `# not run in tests` is skipped here; its comment says which test runs it
(or why none can).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


RUNNABLE = [
    pytest.param(page, block, id=f"{page.relative_to(ROOT)}:block{index}")
    for page in PAGES
    for index, block in enumerate(python_blocks(page))
    if not block.startswith("# not run in tests")
]


@pytest.mark.parametrize(("page", "block"), RUNNABLE)
def test_documented_example_runs(page, block):
    exec(compile(block, str(page), "exec"), {"__name__": "documented_example"})
