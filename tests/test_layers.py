"""model and sdd import neither Textual nor the engine (DESIGN §1: layers import downward)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.import_graph import graph

LOWER = [REPO / "console" / "model.py", REPO / "console" / "records.py",
         *sorted((REPO / "console" / "sdd").glob("*.py"))]
FORBIDDEN = ("textual", "console.engine", "console.tui", "console.remote", "console.cli",
             "console.control")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_lower_layers_import_nothing_above_them() -> None:
    assert len(LOWER) > 5
    offenders = {
        f"{path.relative_to(REPO)} imports {name}"
        for path in LOWER for name in _imports(path)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    }
    assert offenders == set()


def test_importing_the_store_loads_no_textual() -> None:
    code = (
        "import sys, console.model, console.sdd, console.sdd.summary, console.sdd.skeleton, "
        "console.sdd.watcher\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'textual' "
        "or m.startswith(('console.engine', 'console.tui', 'console.remote')))\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


#: DESIGN §1's layers, lowest first; engine and remote are peers that never import
#: each other (the cli layer wires them together)
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", ("console.model", "console.records", "console.control", "console.action_rules")),
    ("sdd", ("console.sdd",)),
    ("engine", ("console.engine", "console.demo")),
    ("remote", ("console.remote",)),
    ("tui", ("console.tui",)),
    ("cli", ("console.cli", "console.__main__", "console")),
)
RANK = {"model": 0, "sdd": 1, "engine": 2, "remote": 2, "tui": 3, "cli": 4}


def layer_of(module: str) -> str:
    best = ""
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, found = prefix, layer
    assert best, f"{module} belongs to no layer: add it to LAYERS"
    return found


def test_every_module_imports_only_its_own_layer_or_lower() -> None:
    edges = graph()
    assert len(edges) > 50
    offenders = []
    for source, targets in edges.items():
        mine = layer_of(source)
        for target in targets:
            theirs = layer_of(target)
            if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
                offenders.append(f"{source} ({mine}) imports {target} ({theirs})")
    assert sorted(offenders) == []
