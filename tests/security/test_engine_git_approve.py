"""#15 part 3 for approve: applying a proposal in its sandbox runs git (status, apply,
rev-parse) through the engine's safe git too, so repository config planted by someone
else runs no program there and sees no secret."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import trusted
from tests.test_evolution import _propose, git, make_project


def test_approve_runs_no_program_the_repository_config_names(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()
    fsmonitor = markers / "fsmonitor.sh"
    fsmonitor.write_text(f"#!/bin/sh\nenv > {markers}/fsmonitor.env\n")
    fsmonitor.chmod(0o755)
    git(root, "config", "core.fsmonitor", str(fsmonitor))
    git(root, "config", "filter.evil.clean", f"sh -c 'env > {markers}/clean.env; cat' --")
    git(root, "config", "filter.evil.required", "true")
    git(root, "config", "diff.external", f"sh -c 'env > {markers}/diff.env' --")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    trusted(root)  # the git config is part of what is trusted (#32): trusted, it runs nothing
    pid = _propose(root, "Format before lint", "bernstein.yaml",
                   (root / "bernstein.yaml").read_text() + "# approved\n")
    env = {**os.environ, "OPENAI_API_KEY": "sk-secret-canary"}
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "approve", pid,
                             "--reason", "ok"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "merged into main" in result.stdout
    assert sorted(p.name for p in markers.iterdir()) == ["fsmonitor.sh"]  # nothing ran
