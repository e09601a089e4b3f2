"""The shape of the code, as the reshape issue measures it: layout, sizes, import cycles, plumbing.

    python examples/benchmarks/code_shape.py [--tree]

Prints, for `gymenvs/` and `wrappers/` (fixture repos excluded):
- the folders with their modules and lines (`--tree`: every module);
- the largest module and the ten longest functions;
- duplicated blocks: places that repeat six or more identical code lines found earlier;
- import cycles between modules (every `import`, also those inside functions);
- hand-written HTTP clients (`httpx`/`requests`/`urllib`/`http.client` calls that build or send) and
  hand-written retry loops (a loop around a `try` whose handler retries: `continue`, a sleep, or a
  counter named like attempt/retry), each with its place, so every count can be checked by eye.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

ROOTS = ("gymenvs", "wrappers")
EXCLUDE = ("gymenvs/swe/tasks/fixtures/repos", "gymenvs/terminal/fixtures")
HTTP_CALLS = {
    ("httpx", "Client"), ("httpx", "AsyncClient"), ("httpx", "get"), ("httpx", "post"), ("httpx", "request"),
    ("httpx", "stream"), ("requests", "get"), ("requests", "post"), ("requests", "Session"),
    ("request", "urlopen"), ("urllib.request", "urlopen"), ("client", "HTTPConnection"),
    ("http.client", "HTTPConnection"), ("socket", "create_connection"),
}
RETRY_NAMES = ("attempt", "retry", "retries", "tries")
WINDOW = 6  # identical lines that make a duplicated block


def modules(top: Path) -> dict[str, Path]:
    found = {}
    for root in ROOTS:
        for path in sorted((top / root).rglob("*.py")):
            rel = path.relative_to(top).as_posix()
            if rel.startswith(EXCLUDE):
                continue
            name = rel[:-3].replace("/", ".").removesuffix(".__init__")
            found[name] = path
    return found


def imported_names(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    package = name if is_package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def is_retry_loop(loop: ast.For | ast.While) -> bool:
    handlers = [h for node in ast.walk(loop) if isinstance(node, ast.Try) for h in node.handlers]
    if not handlers:
        return False
    loop_var = dotted(loop.target) if isinstance(loop, ast.For) else ""
    named = any(word in loop_var.lower() for word in RETRY_NAMES)
    for handler in handlers:
        for node in ast.walk(handler):
            if isinstance(node, ast.Continue):
                return True
            if isinstance(node, ast.Call) and dotted(node.func).endswith("sleep"):
                return True
            if isinstance(node, ast.Name) and any(word in node.id.lower() for word in RETRY_NAMES):
                return True
    return named


def code_lines(path: Path) -> list[tuple[int, str]]:
    """Lines that carry code: stripped, without blanks, comments, imports and lone brackets."""
    kept = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", "import ", "from ")) or text in {")", "]", "}", "),", "],", "},", '"""'}:
            continue
        kept.append((number, text))
    return kept


def duplicated_pairs(paths: list[Path], top: Path) -> dict[tuple[str, str], int]:
    """Pairs of files (or two places in one file) sharing a block of WINDOW identical code lines: first line of A."""
    seen: dict[tuple[str, ...], tuple[str, int]] = {}
    pairs: dict[tuple[str, str], int] = {}
    for path in paths:
        rel = path.relative_to(top).as_posix()
        lines = code_lines(path)
        last_hit: dict[str, int] = {}
        for start in range(len(lines) - WINDOW + 1):
            block = tuple(text for _, text in lines[start : start + WINDOW])
            here = (rel, lines[start][0])
            first = seen.setdefault(block, here)
            if first == here or (first[0] == rel and lines[start][0] - first[1] < WINDOW):
                continue
            if last_hit.get(first[0], -WINDOW) < start - 1:  # a new run, not the next line of the same one
                key = (f"{first[0]}:{first[1]}", f"{rel}:{here[1]}")
                pairs[key] = pairs.get(key, 0) + 1
            last_hit[first[0]] = start
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="store_true", help="list every module under its folder")
    args = parser.parse_args()
    top = Path(__file__).resolve().parents[2]
    mods = modules(top)
    lines = {name: len(path.read_text().splitlines()) for name, path in mods.items()}
    folders: dict[str, list[str]] = defaultdict(list)
    for name, path in mods.items():
        folders[path.parent.relative_to(top).as_posix()].append(name)

    print(f"modules: {len(mods)}, lines: {sum(lines.values())}, folders: {len(folders)}")
    for folder in sorted(folders):
        names = folders[folder]
        print(f"  {folder}/  {len(names)} modules, {sum(lines[n] for n in names)} lines")
        if args.tree:
            for name in sorted(names, key=lambda n: mods[n].name):
                print(f"      {mods[name].name}  {lines[name]}")

    largest = max(lines, key=lines.__getitem__)
    print(f"\nlargest module: {mods[largest].relative_to(top)} ({lines[largest]} lines)")

    functions, graph, http, retries = [], {name: set() for name in mods}, [], []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        rel = path.relative_to(top).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.lineno} {node.name}"))
            elif isinstance(node, ast.Call):
                func = dotted(node.func)
                head, _, attr = func.rpartition(".")
                if (head, attr) in HTTP_CALLS:
                    http.append(f"{rel}:{node.lineno} {func}")
            elif isinstance(node, (ast.For, ast.While)) and is_retry_loop(node):
                retries.append(f"{rel}:{node.lineno}")
        for target in imported_names(tree, name, path.name == "__init__.py"):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + ".") and target != name.rpartition(".")[0]:
                graph[name].add(target)

    print("longest functions:")
    for length, where in sorted(functions, reverse=True)[:10]:
        print(f"  {length:4d}  {where}")
    found = cycles(graph)
    print(f"\nimport cycles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    print(f"\nhand-written HTTP client calls: {len(http)}")
    for where in http:
        print(f"  {where}")
    print(f"hand-written retry loops: {len(retries)}")
    for where in retries:
        print(f"  {where}")

    sources = list(mods.values()) + sorted((top / "tests").rglob("*.py")) + sorted((top / "examples").rglob("*.py"))
    blocks = duplicated_pairs([p for p in sources if not p.relative_to(top).as_posix().startswith(EXCLUDE)], top)
    print(f"\nduplicated blocks ({WINDOW}+ identical code lines, library, tests and examples): {len(blocks)}")
    for (first, second) in blocks:
        print(f"  {first} ~ {second}")


if __name__ == "__main__":
    main()
