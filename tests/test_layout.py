"""The layout's rules: `gymenvs` never imports `wrappers`, no modules import each other in a circle, and
`<tool_call>` text has one codec.

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


def test_tool_call_text_is_written_and_read_only_by_the_core_codec():
    """`<tool_call>` text has one codec, gymenvs/core/actions.py: no other module of gymenvs or wrappers has the tag in
    a string (a regex, an f-string, a test for it) outside docstrings and comments. The reference agent is left out:
    it runs inside task containers on the stdlib alone."""
    allowed = {"gymenvs.core.actions", "gymenvs.container.agent.reference_agent"}
    found = []
    for name, path in _code_shape().modules(ROOT).items():
        if name in allowed:
            continue
        tree = ast.parse(path.read_text())
        documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, documented) and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and "tool_call>" in node.value
                  and id(node) not in docstrings]
    assert found == []
