"""The shape of the code, as the reshape issue measures it: layout, sizes, import cycles, plumbing.

    python examples/benchmarks/code_shape.py [--tree] [--root CHECKOUT]

Prints, for `gymenvs/` and `wrappers/` (fixture repos excluded):
- the folders with their modules and lines (`--tree`: every module);
- the largest module and the ten longest functions;
- duplicated blocks: places that repeat six or more identical code lines found earlier;
- import cycles between modules (every `import`, also those inside functions);
- hand-written HTTP clients (`httpx`/`requests`/`urllib`/`http.client` calls that build or send) and
  hand-written retry loops (a loop around a `try` whose handler retries: `continue`, a sleep, or a
  counter named like attempt/retry), each with its place, so every count can be checked by eye;
- the container plumbing: `DockerSandbox(...)` constructions and `.api.` uses (the docker SDK's low-level
  client) outside gymenvs/container/runtime/, the docker SDK's private attributes used anywhere (`._url(`,
  `._raise_for_status`, `._get_raw_response_socket`, `._sock`), the module aliases (`alias_moved_modules`
  calls and the entries of the dicts given to them) and the imports of a task family (gymenvs.swe,
  gymenvs.terminal) inside gymenvs/container/, each with its place;
- dead functions: module-level functions and methods defined in gymenvs/ or wrappers/ whose name nothing
  else in gymenvs/, wrappers/, tests/ or examples/ uses (as a name, an attribute, an imported name or a word
  of a string that is not a docstring), besides dunder methods, `test_*`, `@tool` methods, pydantic
  validators, functions registered by a decorator (`@atexit.register`), protocol stubs (methods of a
  `Protocol`, and bodies that are only `...`) and the names in an `__all__` or in the lazy tables of
  wrappers/trl/__init__.py. Methods of a class with a base class from outside gymenvs/ and wrappers/ are
  marked `*`: the framework may call them (an HTTP handler's `do_POST`, an `ast.NodeVisitor`'s `visit_Call`).

Runs on any checkout of the project (older ones too): a figure whose folder is not there counts 0.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter, defaultdict
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
RUNTIME = "gymenvs/container/runtime/"  # the one place that may talk to the docker SDK directly
PLATFORM = "gymenvs/container/"
FAMILIES = ("gymenvs.swe", "gymenvs.terminal")  # the task families' packages
PRIVATE_SDK = ("_url", "_raise_for_status", "_get_raw_response_socket", "_sock")
#: Decorators that hand a function to a framework that calls it: `@tool`, pydantic's validators, and
#: registrations (`@atexit.register`, `@create_shared_memory.register(...)`).
REGISTERING = {"tool", "field_validator", "model_validator", "validator", "root_validator", "field_serializer",
               "model_serializer", "computed_field", "register"}
REFERENCING = ("gymenvs", "wrappers", "tests", "examples")  # the folders whose uses keep a function alive
LAZY_TABLES = "wrappers/trl/__init__.py"
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


# -- the container plumbing ------------------------------------------------------------------


def plumbing(mods: dict[str, Path], top: Path) -> dict[str, list[str]]:
    """The places of each plumbing figure: sandbox constructions and `.api.` uses outside the runtime, private
    docker-SDK attributes, module aliases, and imports of a task family inside the platform."""
    found: dict[str, list[str]] = {"sandboxes": [], "api": [], "private": [], "alias calls": [], "aliases": [],
                                   "family imports": [], "cross-family names": []}
    for name, path in mods.items():
        rel = path.relative_to(top).as_posix()
        tree = ast.parse(path.read_text())
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        assignments = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                       for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                func = dotted(node.func)
                if func.rpartition(".")[2] == "DockerSandbox" and not rel.startswith(RUNTIME):
                    found["sandboxes"].append(f"{where} {func}(...)")
                if func.rpartition(".")[2] == "alias_moved_modules":
                    found["alias calls"].append(where)
                    entries = dict_entries(node.args[0], assignments) if node.args else 0
                    found["aliases"] += [where] * entries if entries is not None else [f"{where} (not counted: not a literal)"]
            elif isinstance(node, ast.Attribute):
                if (isinstance(node.value, ast.Attribute) and node.value.attr == "api"
                        and not rel.startswith(RUNTIME)):
                    found["api"].append(f"{where} {dotted(node) or '.api.' + node.attr}")
                if node.attr in PRIVATE_SDK:
                    found["private"].append(f"{where} .{node.attr}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = [target for target in import_targets(node, package) if family_of(target)]
                if targets and rel.startswith(PLATFORM):
                    found["family imports"].append(f"{where} {targets[0]}")
                own = family_of(name)
                for target in targets:
                    if own and family_of(target) != own:  # a name imported from another task family
                        found["cross-family names"] += [f"{where} {target}.{alias.name}" for alias in node.names]
    return found


def family_of(module: str) -> str | None:
    """The task family package `module` belongs to, or None."""
    return next((family for family in FAMILIES if module == family or module.startswith(family + ".")), None)


def import_targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import statement names (relative ones resolved against `package`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    return [base]


def dict_entries(node: ast.AST, assignments: dict[str, ast.AST]) -> int | None:
    """The entries of a dict given as a literal, a comprehension over a literal, `**` of those, or a module-level
    name bound to one; None when they cannot be counted without running the code."""
    if isinstance(node, ast.Name) and node.id in assignments:
        return dict_entries(assignments[node.id], assignments)
    if isinstance(node, ast.Dict):
        total = 0
        for key, value in zip(node.keys, node.values):
            count = 1 if key is not None else dict_entries(value, assignments)
            if count is None:
                return None
            total += count
        return total
    if isinstance(node, ast.DictComp) and all(isinstance(g.iter, (ast.Tuple, ast.List, ast.Set)) and not g.ifs
                                              for g in node.generators):
        total = 1
        for generator in node.generators:
            total *= len(generator.iter.elts)  # type: ignore[attr-defined]
        return total
    return None


def place(where: str) -> tuple[str, int]:
    """"path:line rest" sorted by path, then line."""
    path, _, rest = where.partition(":")
    return path, int(rest.split()[0]) if rest.split() and rest.split()[0].isdigit() else 0


def largest_class(mods: dict[str, Path], top: Path) -> tuple[int, str]:
    classes = [(node.end_lineno - node.lineno + 1, f"{path.relative_to(top).as_posix()}:{node.lineno} {node.name}")
               for path in mods.values() for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef)]
    return max(classes) if classes else (0, "none")


# -- dead functions -----------------------------------------------------------------------------


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (of the module, its classes and functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def references(tree: ast.AST) -> list[tuple[str, int]]:
    """Every use of a name in `tree`, with its line: names, attributes, imported names, and the words of the
    strings that are not docstrings (`getattr(x, "name")`, `"module:function"`)."""
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.append((node.id, node.lineno))
        elif isinstance(node, ast.Attribute):
            found.append((node.attr, node.lineno))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(part, node.lineno) for alias in node.names for part in alias.name.split(".")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [(word, node.lineno) for word in WORD.findall(node.value)]
    return found


def decorator_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {dotted(d.func if isinstance(d, ast.Call) else d).rpartition(".")[2] for d in function.decorator_list}


def is_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body that is only `...` (after an optional docstring)."""
    body = function.body[1:] if len(function.body) > 1 and isinstance(function.body[0], ast.Expr) else function.body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis
               for node in body)


def public_tables(tree: ast.AST, rel: str) -> set[str]:
    """The names an `__all__` lists, and for wrappers/trl/__init__.py the keys of its lazy tables."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if "__all__" in targets and isinstance(node.value, (ast.List, ast.Tuple)):
            names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
        elif rel == LAZY_TABLES and isinstance(node.value, ast.Dict):
            names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return names


def dead_functions(mods: dict[str, Path], top: Path) -> list[tuple[str, bool]]:
    """(place and name, defined in a class with an outside base) of each function nothing else uses."""
    project_classes = set()
    definitions = []  # (name, rel, first line, last line, outside base)
    exempt: set[str] = set()
    for path in mods.values():
        rel = path.relative_to(top).as_posix()
        tree = ast.parse(path.read_text())
        exempt |= public_tables(tree, rel)
        project_classes |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for path in mods.values():
        rel = path.relative_to(top).as_posix()
        tree = ast.parse(path.read_text())
        scopes: list[tuple[ast.AST, ast.ClassDef | None]] = [(node, None) for node in tree.body]
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                scopes += [(item, node) for item in node.body]
        for node, owner in scopes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            name = node.name
            bases = [dotted(base).rpartition(".")[2] for base in owner.bases] if owner else []
            if ((name.startswith("__") and name.endswith("__")) or name.startswith("test_") or name in exempt
                    or decorator_names(node) & REGISTERING or "Protocol" in bases or is_stub(node)):
                continue
            outside = any(base not in project_classes and base not in ("object", "ABC", "Generic") for base in bases)
            definitions.append((name, rel, node.lineno, node.end_lineno or node.lineno, outside))
    used: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for folder in REFERENCING:
        for path in sorted((top / folder).rglob("*.py")):
            rel = path.relative_to(top).as_posix()
            if rel.startswith(EXCLUDE):
                continue
            try:
                tree = ast.parse(path.read_text())
            except (SyntaxError, UnicodeDecodeError):
                continue  # a fixture that is not Python 3 on purpose
            for word, line in references(tree):
                used[word].append((rel, line))
    dead = []
    for name, rel, first, last, outside in definitions:
        if not any(where != rel or not first <= line <= last for where, line in used.get(name, [])):
            dead.append((f"{rel}:{first} {name}", outside))
    return dead


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="store_true", help="list every module under its folder")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2],
                        help="the checkout to measure (default: this one), e.g. an older one for a before/after table")
    args = parser.parse_args()
    top = args.root.resolve()
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
    class_lines, class_where = largest_class(mods, top)
    print(f"largest class: {class_where} ({class_lines} lines)")

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

    found = plumbing(mods, top)
    for key, title in (("sandboxes", f"DockerSandbox(...) constructions outside {RUNTIME}"),
                       ("api", f".api. uses (the docker SDK's low-level client) outside {RUNTIME}"),
                       ("private", "private docker-SDK attributes used (" + ", ".join(f".{a}" for a in PRIVATE_SDK) + ")"),
                       ("alias calls", "alias_moved_modules calls"),
                       ("aliases", "module aliases (entries of the dicts given to alias_moved_modules)"),
                       ("family imports", f"imports of a task family ({', '.join(FAMILIES)}) inside {PLATFORM}"),
                       ("cross-family names", "names one task family imports from another")):
        absent = " (no such folder in this checkout)" if key == "family imports" and not (top / PLATFORM).is_dir() else ""
        print(f"\n{title}: {len(found[key])}{absent}")
        for where, times in sorted(Counter(found[key]).items(), key=lambda item: place(item[0])):
            print(f"  {where}" + (f"  (x{times})" if times > 1 else ""))

    dead = dead_functions(mods, top)
    marked = sum(outside for _, outside in dead)
    print(f"\ndead functions (defined in gymenvs/ or wrappers/, used nowhere in {', '.join(REFERENCING)}): {len(dead)}"
          f" ({marked} marked *: methods of a class with a base from outside, which the framework may call)")
    for where, outside in sorted(dead, key=lambda item: place(item[0])):
        print(f"  {'*' if outside else ' '} {where}")


if __name__ == "__main__":
    main()
