"""agent_test_mutation (seed 000): do the tests the agent changed catch a broken
implementation? The project modules those tests import are mutated one small change at
a time (an arithmetic or comparison operator flipped, a boolean constant negated) in a
copy of the checkout, and the changed tests run against each mutant with the project's
pytest; the share of mutants they kill must reach `mutation_threshold` (default 0.5)."""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from console.engine.gates import digest as dg
from console.engine.gates.base import GateContext, Verdict, run_tool
from console.engine.gates.imports import (
    imported_modules,
    is_test_file,
    module_names,
    project_files,
)

MAX_MUTANTS = 8
MAX_SOURCES = 3
_SWAPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv,
                            ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE,
                            ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}
IGNORED_IN_COPIES = shutil.ignore_patterns(".git", ".sdd", ".venv", "venv", "__pycache__",
                                  "node_modules", ".mypy_cache", ".ruff_cache")


def _mutants(source: str) -> Iterator[tuple[int, str, str]]:
    """(line, what changed, mutated source) for each operator or constant in `source`."""
    tree = ast.parse(source)
    spots = [n for n in ast.walk(tree)
             if (isinstance(n, ast.BinOp) and type(n.op) in _SWAPS)
             or (isinstance(n, ast.Compare) and type(n.ops[0]) in _SWAPS)
             or (isinstance(n, ast.Constant) and isinstance(n.value, bool))]
    for index in range(len(spots)):
        copy = ast.parse(source)
        node = [n for n in ast.walk(copy)
                if (isinstance(n, ast.BinOp) and type(n.op) in _SWAPS)
                or (isinstance(n, ast.Compare) and type(n.ops[0]) in _SWAPS)
                or (isinstance(n, ast.Constant) and isinstance(n.value, bool))][index]
        before = ast.unparse(node)
        if isinstance(node, ast.BinOp):
            node.op = _SWAPS[type(node.op)]()
        elif isinstance(node, ast.Compare):
            node.ops[0] = _SWAPS[type(node.ops[0])]()
        else:
            node.value = not node.value
        yield node.lineno, f"{before} → {ast.unparse(node)}", ast.unparse(copy)


def _sources(ctx: GateContext, tests: list[str]) -> list[str]:
    """Project files (not tests) that the changed tests import."""
    wanted = set().union(*(imported_modules(ctx.root / t) for t in tests))
    found = []
    for path in sorted(project_files(ctx.root)):
        rel = str(path.relative_to(ctx.root))
        if is_test_file(rel):
            continue
        if module_names(rel) & wanted:
            found.append(rel)
    return found[:MAX_SOURCES]


def agent_test_mutation(ctx: GateContext) -> Verdict:
    tests = [f for f in ctx.changed if is_test_file(f) and Path(f).name != "conftest.py"]
    if not tests:
        return Verdict("pass", "no test file changed")
    sources = _sources(ctx, tests)
    if not sources:
        return Verdict("warn", "the changed tests import no project module to mutate")
    argv = [*ctx.tool("pytest", "pytest"), "-x", "-q", "-p", "no:cacheprovider", *tests]
    env = {**(ctx.env if ctx.env is not None else os.environ), "PYTHONDONTWRITEBYTECODE": "1"}
    threshold = float(ctx.option("mutation_threshold", 0.5))
    with tempfile.TemporaryDirectory(prefix="bt-agent-mutation-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(ctx.root, tree, ignore=IGNORED_IN_COPIES, symlinks=True)
        clean = run_tool(argv, tree, ctx.timeout_s, env=env, cancel=ctx.cancel)
        if clean.exit_code != 0:
            return Verdict("skipped", "the changed tests do not pass unmutated (the tests gate "
                                      "says why): nothing to measure")
        killed, survived = 0, list[dg.DigestEntry]()
        for rel in sources:
            original = (tree / rel).read_text(encoding="utf-8", errors="replace")
            try:
                mutants = list(_mutants(original))
            except SyntaxError:
                continue
            for line, change, text in mutants[:max(0, MAX_MUTANTS - killed - len(survived))]:
                (tree / rel).write_text(text, encoding="utf-8")
                run = run_tool(argv, tree, ctx.timeout_s, env=env, cancel=ctx.cancel)
                if run.exit_code != 0:
                    killed += 1
                else:
                    survived.append(dg.DigestEntry(f"mutant survived: {change}", rel, line))
            (tree / rel).write_text(original, encoding="utf-8")
    total = killed + len(survived)
    if not total:
        return Verdict("warn", "nothing to mutate in the modules the changed tests import")
    score = killed / total
    meta = {"killed": killed, "survived": len(survived), "score": round(score, 4),
            "tests": tests, "mutated": sources}
    details = f"the changed tests killed {killed} of {total} mutant(s) ({score:.0%}, " \
              f"threshold {threshold:.0%})"
    digest = dg.build(survived, ctx.root).render() if survived else ""
    return Verdict("pass" if score >= threshold else "fail", details, digest, meta)
