"""`.sdd/knowledge/` in every agent prompt (#20.8, seed 001), links refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.engine_kit import make_repo, tasks, ticket


def test_project_knowledge_reaches_the_prompt_and_a_link_does_not(tmp_path: Path) -> None:
    root = make_repo(tmp_path, config="quality_gates:\n  enabled: false\n")
    knowledge = root / ".sdd" / "knowledge"
    knowledge.mkdir(exist_ok=True)
    (knowledge / "conventions.md").write_text("Money is integer cents. KNOWLEDGE-MARK\n")
    (knowledge / "notes.bin").write_text("NOT-MARKDOWN\n")
    outside = tmp_path / "outside.md"
    outside.write_text("TOP-SECRET\n")
    (knowledge / "secret.md").symlink_to(outside)
    ticket(root, "k", id="K1", title="Uses the knowledge",
           description=f"prompt {tmp_path}/prompt.txt\nwrite k.txt done")
    result = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "run",
                             "--until-idle"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert tasks(root)["K1"].status == "done"
    prompt = (tmp_path / "prompt.txt").read_text()
    assert "# Project knowledge (.sdd/knowledge/)\n\n## conventions.md\nMoney is integer " \
        "cents. KNOWLEDGE-MARK" in prompt
    assert "TOP-SECRET" not in prompt and "NOT-MARKDOWN" not in prompt
    assert "K1: knowledge not read:" in result.stdout and "secret.md" in result.stdout
