"""Helpers for engine tests: a real git repo, the spec agent, tickets, reading results."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.sdd.skeleton import init_project
from console.sdd.source import LocalSource
from tests.conftest import trusted

SPEC_AGENT = Path(__file__).resolve().parent / "agents" / "spec_agent.py"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


def make_repo(base: Path, *, config: str = "", workers: int | None = None) -> Path:
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "test")
    git(root, "config", "user.email", "test@example.invalid")
    (root / "README.md").write_text("# test project\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    init_project(root)
    lines = [
        "agents:",
        "  script:",
        f"    command: [{json.dumps(sys.executable)}, {json.dumps(str(SPEC_AGENT))}]",
        "  env: [SPEC_AGENT_LOG, SPEC_AGENT_LOCKS]",
        "  kill_grace_s: 0.5",
    ]
    if workers:
        lines.append(f"workers: {workers}")
    text = "\n".join(lines) + "\n" + textwrap.dedent(config)
    (root / "bernstein.yaml").write_text(text)
    return trusted(root)


def ticket(root: Path, name: str, **fields: Any) -> Path:
    import yaml

    path = root / ".sdd" / "backlog" / "open" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def tasks(root: Path) -> dict[str, Any]:
    source = LocalSource(root)
    source.load()
    return source.state.tasks


def agent_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def until(what: str, check: Callable[[], Any], timeout: float = 240) -> Any:
    """Poll `check` until it gives something truthy; AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def assert_idle_exit(root: Path, code: int | None, output: str | bytes) -> None:
    """`run --until-idle`'s exit code: 1, naming them, exactly when tasks ended failed;
    else 0 (#19.8)."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    failed = sorted(tid for tid, task in tasks(root).items() if task.status == "failed")
    assert code == (1 if failed else 0), (failed, text[-3000:])
    if failed:
        assert f"failed: {failed[0]}" in text and "--exit-zero" in text, text[-3000:]
