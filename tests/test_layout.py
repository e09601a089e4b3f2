"""The layout's two rules: `gymenvs` never imports `wrappers`, and no modules import each other in a circle.

The import graph is the one examples/benchmarks/code_shape.py draws: every `import` in a module, at its top
or inside a function, so a circle hidden in a function (as `agent_rollout` <-> `rollout` once was) counts.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _code_shape():
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "examples" / "benchmarks" / "code_shape.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import_graph(code_shape) -> dict[str, set[str]]:
    mods = code_shape.modules(ROOT)
    graph = {}
    for name, path in mods.items():
        imported = code_shape.imported_names(ast.parse(path.read_text()), name, path.name == "__init__.py")
        graph[name] = {other for other in imported if other in mods and other != name}
    return graph


def test_gymenvs_never_imports_wrappers():
    graph = _import_graph(_code_shape())
    upward = {name: sorted(n for n in targets if n.startswith("wrappers")) for name, targets in graph.items()
              if name.startswith("gymenvs")}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def test_no_modules_import_each_other_in_a_circle():
    code_shape = _code_shape()
    assert code_shape.cycles(_import_graph(code_shape)) == []
