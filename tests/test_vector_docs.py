"""docs/vector.md's Python examples run as written (blocks starting "# not run in tests" excepted)."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "vector.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
RUNNABLE = [block for block in BLOCKS if not block.startswith("# not run in tests")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_vector_doc_example_runs(block):
    exec(compile(block, str(DOC), "exec"), {"__name__": "vector_doc_example"})
