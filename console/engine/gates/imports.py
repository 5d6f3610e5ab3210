"""The project's Python modules and who imports whom: for test scoping and import cycles."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Sequence
from pathlib import Path

_EXCLUDED = {".git", ".venv", "venv", "node_modules", ".sdd", "__pycache__", ".tox", "build",
             "dist", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def is_test_file(path: str) -> bool:
    name = Path(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                     or name == "conftest.py")


def module_names(path: str) -> set[str]:
    """The dotted names a file can be imported as (with and without a src/ prefix)."""
    parts = list(Path(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    names = {".".join(parts)} if parts else set()
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        names.add(".".join(parts[1:]))
    return {n for n in names if n}


def project_files(root: Path, limit: int = 20000) -> list[Path]:
    found: list[Path] = []
    stack = [root]
    while stack and len(found) < limit:
        directory = stack.pop()
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name in _EXCLUDED or entry.name.startswith("."):
                continue
            if entry.is_dir() and not entry.is_symlink():
                stack.append(entry)
            elif entry.suffix == ".py":
                found.append(entry)
    return found


def imported_modules(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError, OSError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module_of(root: Path, path: Path) -> str | None:
    names = module_names(str(path.relative_to(root)))
    return min(names, key=len) if names else None


def _modules(root: Path) -> dict[Path, str]:
    return {p: m for p in project_files(root) if (m := _module_of(root, p))}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Project module → the project modules it imports at module level (relative ones too)."""
    modules = {m: p for p, m in _modules(root).items()}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in tree.body:  # module level only: imports inside functions break cycles
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _test_modules_under(root: Path, directory: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in project_files(directory)
            if is_test_file(p.name) and p.name != "conftest.py"]


def select_tests(root: Path, changed: list[str], deleted: Sequence[str] = ()) -> list[str]:
    """Seed 002's scope: changed test files; every test under a changed conftest.py; and
    tests that import a changed or deleted module, directly or through other modules."""
    selected = {f for f in changed if is_test_file(f) and Path(f).name != "conftest.py"}
    for f in changed + list(deleted):
        if Path(f).name == "conftest.py":
            selected.update(_test_modules_under(root, (root / f).parent))
    targets: set[str] = set()
    for f in changed + list(deleted):
        if f.endswith((".py", ".pyi")) and not is_test_file(f):
            targets |= module_names(f)
    if not targets:
        return sorted(selected)
    graph = import_graph(root)
    importers: dict[str, set[str]] = {}
    for module, imported in graph.items():
        for target in imported:
            importers.setdefault(target, set()).add(module)
    files = {m: p for p, m in _modules(root).items()}
    reached: set[str] = set()
    queue = deque(t for t in targets if t in graph)
    while queue:
        module = queue.popleft()
        for importer in importers.get(module, ()):
            if importer not in reached:
                reached.add(importer)
                queue.append(importer)
    for module in reached:
        path = files.get(module)
        if path is not None and is_test_file(path.name) and path.name != "conftest.py":
            selected.add(str(path.relative_to(root)))
    gone = {t for t in targets if t not in graph}  # deleted modules: match imports by name
    if gone:
        for path in project_files(root):
            rel = str(path.relative_to(root))
            if is_test_file(rel) and path.name != "conftest.py" and any(
                    i == t or i.startswith(t + ".") for i in imported_modules(path)
                    for t in gone):
                selected.add(rel)
    return sorted(selected)


