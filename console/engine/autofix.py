"""The AutoFixer (seed 002): when every error of a failed lint gate is of a simple class
(unused or unsorted imports, formatting), try `ruff check --fix` and `ruff format` on the
changed files before paying for a new agent attempt. Recorded as an attempt of kind
autofix. When every error of a failed type_check is simple (`simple_type_errors`), the
next attempt is an AutoFixer agent on the cheapest model (engine/chain.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from console.engine.gates.base import ToolMissing, run_tool, tool_argv, tool_environ
from console.model import GateResult

#: ruff codes a mechanical fix handles without judgement
SIMPLE_CODES = frozenset({"F401", "I001", "W291", "W292", "W293", "E302", "E303", "E305",
                          "E231", "E225", "E261", "E262", "E265", "F541", "UP035", "UP006",
                          "UP007", "W391", "Q000", "COM812"})
_CODE = re.compile(r":\d+: ([A-Z]+\d+) ")


def simple_lint(blocking: Sequence[GateResult]) -> list[str] | None:
    """The codes to fix when the only blocker is lint and all its errors are simple."""
    if [r.name for r in blocking] != ["lint"]:
        return None
    digest = blocking[0].digest
    if "more left out" in digest:
        return None
    codes = _CODE.findall(digest)
    if not codes or any(code not in SIMPLE_CODES for code in codes):
        return None
    return sorted(set(codes))


def try_lint_fix(worktree: Path, blocking: Sequence[GateResult],
                 files: Sequence[str]) -> dict[str, Any] | None:
    """Run the mechanical fix; the autofix attempt's record, or None when not applicable."""
    codes = simple_lint(blocking)
    python = [f for f in files if f.endswith((".py", ".pyi")) and (worktree / f).exists()]
    if codes is None or not python:
        return None
    try:
        ruff = tool_argv("ruff", "ruff")
    except ToolMissing:
        return None
    started = time.monotonic()
    env = tool_environ()  # over the project's tree, like every gate tool
    fix = run_tool([*ruff, "check", "--fix", "--force-exclude", "--no-cache", "--select",
                    ",".join(codes), *python], worktree, 60, env=env)
    run_tool([*ruff, "format", "--force-exclude", "--no-cache", *python], worktree, 60,
             env=env)
    return {"model": "ruff --fix", "effort": "mechanical", "kind": "autofix",
            "attempt_number": 0, "started_at": time.time(), "cost_usd": 0.0,
            "latency_s": round(time.monotonic() - started, 3), "tokens_used": 0,
            "escalated": False, "escalation_reason": None, "fixed": len(codes),
            "codes": codes, "exit_code": fix.exit_code}


#: mypy error kinds a cheap model fixes reliably (a missing import, a misspelt name)
#: seed 002's simple classes in mypy's terms: ImportNotFound (a missing name or import)
#: and TypeMismatch (a value of the wrong type assigned, passed or returned)
SIMPLE_TYPE_KINDS = frozenset({"name-defined", "import", "import-untyped", "import-not-found",
                               "attr-defined", "assignment", "arg-type", "return-value"})
_KIND = re.compile(r"\[([a-z-]+)\]\s*$")


def simple_type_errors(gate: str, digest: str) -> bool:
    """Every error of a failed type_check is of a simple kind: worth the cheapest model."""
    if gate != "type_check":
        return False
    kinds = [m.group(1) for line in digest.splitlines() if (m := _KIND.search(line.strip()))]
    return bool(kinds) and all(kind in SIMPLE_TYPE_KINDS for kind in kinds)
