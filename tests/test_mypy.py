"""#18: `mypy console` under the project's own config ([tool.mypy] in pyproject.toml:
strict on the model, the .sdd/ layer and the store, check_untyped_defs everywhere)
reports nothing. The real mypy, run as a subprocess from the repository root."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_mypy_is_clean_under_the_projects_config(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path),
                           "console"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout


def test_every_type_ignore_says_why() -> None:
    """A `type: ignore[code]` carries a one-line reason after it, on the same line."""
    bare = [f"{path.relative_to(REPO)}:{number}"
            for path in sorted((REPO / "console").rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if (m := re.search(r"type:\s*ignore(\[[^\]]*\])?(.*)$", line))
            and not re.search(r"#\s*\S", m.group(2))]
    assert bare == []
