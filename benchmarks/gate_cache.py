"""A second gate run on an unchanged diff against the first (DESIGN §6: ≥ 20× faster).

A real repo with a real change (an unused import, a failing test), the real tools
(ruff, mypy, pytest, detect-secrets, …) through `bernstein-tui gates --json`. A
"first" run starts from an empty cache; a "cached" run follows one on the same
diff. Both are measured as the pipeline's own time and as the whole command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Figure

CALC = "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def _project(base: Path) -> Path:
    root = base / "proj"
    (root / "src" / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "calc" / "__init__.py").write_text(CALC.replace("import os\n\n\n", ""))
    (root / "tests" / "test_calc.py").write_text(TEST)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["src"]\n')
    (root / "bernstein.yaml").write_text("quality_gates:\n  type_check: true\n  tests: true\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=b", "-c", "user.email=b@b.invalid", "commit", "-qm", "i"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    for command in ("init", "trust"):  # (its bernstein.yaml names gates: trusted first)
        subprocess.run([sys.executable, "-m", "console", "-C", str(root), command],
                       check=True, capture_output=True, env=_env(base))
    (root / "src" / "calc" / "__init__.py").write_text(CALC)
    return root


def _env(base: Path) -> dict[str, str]:
    """As from an activated virtualenv (the tools are the venv's, not a pyenv shim's:
    a shell shim is asked for `--version` on every run, ~0.35 s for pytest), with its
    own trust records."""
    return dict(os.environ, XDG_CONFIG_HOME=str(base / "config"),
                PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                      os.environ.get("PATH", "")]))


def _gates(root: Path) -> tuple[float, float, dict]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "gates", "--json"],
                         capture_output=True, text=True, env=_env(root.parent))
    wall = time.perf_counter() - started
    if out.returncode not in (0, 1):  # 1: a gate failed (the report is still there)
        raise RuntimeError(f"gates exited {out.returncode}: {out.stderr.strip()[:200]}")
    report = json.loads(out.stdout)
    return wall * 1000, float(report["total_duration_ms"]), report


def run(quick: bool) -> list[Figure]:
    repeats = 2 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-gates-") as tmp:
        root = _project(Path(tmp))
        cache = root / ".sdd" / "caching" / "gates"
        first_wall, first_pipe, cached_wall, cached_pipe = [], [], [], []
        for _ in range(repeats):
            shutil.rmtree(cache, ignore_errors=True)
            wall, pipe, report = _gates(root)
            assert report["cache_hits"] == 0
            first_wall.append(wall)
            first_pipe.append(pipe)
            wall, pipe, report = _gates(root)
            assert report["cache_hits"] == len(report["results"])
            cached_wall.append(wall)
            cached_pipe.append(pipe)
    gates = [r["name"] for r in report["results"]]
    first = Figure("gates: first run (pipeline)", "ms", first_pipe, notes={"gates": gates})
    cached = Figure("gates: cached run (pipeline)", "ms", cached_pipe, target="≥ 20× faster")
    cached.notes["ratio_vs_first"] = round(cached.median / first.median, 4)
    first_cmd = Figure("gates: first run (whole command)", "ms", first_wall)
    cached_cmd = Figure("gates: cached run (whole command)", "ms", cached_wall)
    cached_cmd.notes["ratio_vs_first"] = round(cached_cmd.median / first_cmd.median, 4)
    return [first, cached, first_cmd, cached_cmd]
