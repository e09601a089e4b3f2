"""The layout's rules: `gymenvs` never imports `wrappers`; no modules import each other in a circle; the container
platform (gymenvs/container/) imports no task family; only its Docker runtime (gymenvs/container/runtime/) imports
the docker SDK, calls a client's `.api` or builds a `DockerSandbox`; no code uses the SDK's private attributes;
and `<tool_call>` text has one codec.

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


# -- the container platform and the Docker engine --------------------------------------------------------
# gymenvs/container/ runs any task family, on any runtime: it imports no family, and only its Docker runtime
# (gymenvs/container/runtime/) speaks to the docker SDK, through its public API.

FAMILIES = ("gymenvs.swe", "gymenvs.terminal")
DOCKER_RUNTIME = "gymenvs.container.runtime"
#: Private attributes of the docker SDK that code once reached into.
SDK_PRIVATE = ("_url", "_raise_for_status", "_get_raw_response_socket")
#: Private names of the SDK that are fine as one's own (`self._sock`), never on another object (a client, a response).
SDK_PRIVATE_ON_OTHERS = ("_sock", "_post", "_get")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _parsed() -> dict[str, tuple[Path, ast.AST]]:
    """Every module of gymenvs/ and wrappers/, parsed: {dotted name: (path, tree)}."""
    return {name: (path, ast.parse(path.read_text())) for name, path in _code_shape().modules(ROOT).items()}


def _found(parsed, rule) -> dict[str, list[str]]:
    """{path: what `rule(node)` reports} for the modules where it reports something (`rule` sees every AST node)."""
    found = {}
    for path, tree in parsed.values():
        hits = [f"line {node.lineno}: {hit}" for node in ast.walk(tree) if (hit := rule(node))]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    return found


def test_the_container_platform_imports_no_task_family():
    code_shape = _code_shape()
    platform = {name: path for name, path in code_shape.modules(ROOT).items() if _within(name, "gymenvs.container")}
    assert platform, "gymenvs/container/ (the container platform) is missing"
    families = {}
    for name, path in platform.items():
        imported = code_shape.imported_names(ast.parse(path.read_text()), name, path.name == "__init__.py")
        if found := sorted(n for n in imported if any(_within(n, family) for family in FAMILIES)):
            families[name] = found
    assert families == {}


def test_a_task_family_imports_no_other_family():
    """What two families share (dataset rows, validation, images) belongs to the platform: each family stands alone."""
    code_shape = _code_shape()
    crossing = {}
    for name, path in code_shape.modules(ROOT).items():
        family = next((family for family in FAMILIES if _within(name, family)), None)
        if family is None:
            continue
        imported = code_shape.imported_names(ast.parse(path.read_text()), name, path.name == "__init__.py")
        if found := sorted(n for n in imported if any(_within(n, other) for other in FAMILIES if other != family)):
            crossing[name] = found
    assert crossing == {}


def test_only_the_docker_runtime_imports_docker_or_uses_a_clients_api():
    outside = {name: parsed for name, parsed in _parsed().items() if not _within(name, DOCKER_RUNTIME)}

    def engine_use(node: ast.AST) -> str | None:
        if isinstance(node, ast.Import) and any(_within(alias.name, "docker") for alias in node.names):
            return "import docker"
        if isinstance(node, ast.ImportFrom) and not node.level and _within(node.module or "", "docker"):
            return f"from {node.module} import ..."
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "api":
            return f".api.{node.attr}"
        if isinstance(node, ast.Call) and code_name(node.func) == "DockerSandbox":
            return "DockerSandbox(...)"
        return None

    assert _found(outside, engine_use) == {}


def test_no_private_attribute_of_the_docker_sdk_is_used():
    def private_use(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute):
            on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            if node.attr in SDK_PRIVATE or (node.attr in SDK_PRIVATE_ON_OTHERS and not on_self):
                return f".{node.attr}"
        if isinstance(node, ast.Call) and code_name(node.func) == "getattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in SDK_PRIVATE + SDK_PRIVATE_ON_OTHERS:
                return f"getattr(..., {name.value!r})"
        return None

    assert _found(_parsed(), private_use) == {}


def code_name(node: ast.AST) -> str:
    """The name a call's function goes by: `f` for `f(...)` and for `module.f(...)`."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
