"""For the "looking changes nothing" tests (issue #32 point 7): an untrusted project with
data in .sdd/ (a git repository, more JSONL than a checkpoint needs), a picture of every
byte and name in its tree, and the console run for real on a pty."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.sdd.skeleton import init_project
from tests.conftest import append, task_record
from tests.engine_kit import git

STATES = ("open", "done", "failed", "claimed")
TASKS = 400  # 100 in each state
PER_STATE = TASKS // len(STATES)
#: gate lines past the checkpoint's threshold (4 MB read), so a full read writes one
GATE_LINES = 30_000
TICKET = "alpha.yaml"
LEGACY_CHECKPOINT = Path(".sdd") / "caching" / "console" / "state.ckpt"


def make_project(base: Path) -> Path:
    """An untrusted git repository with data in .sdd/: TASKS tasks, GATE_LINES gate
    lines, a ticket and a gate report."""
    root = base / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "test")
    git(root, "config", "user.email", "test@example.invalid")
    (root / "README.md").write_text("# someone else's project\n")
    init_project(root)
    git(root, "add", "README.md", "bernstein.yaml")
    git(root, "commit", "-qm", "init")
    sdd = root / ".sdd"
    append(sdd / "runtime" / "tasks.jsonl",
           *(task_record(f"T-{i:04d}", STATES[i % len(STATES)]) for i in range(TASKS)))
    lines = [{"task_id": f"T-{i % TASKS:04d}", "gate": "lint", "status": "pass",
              "result": "pass", "duration_ms": 10 + i % 90, "details": "x" * 80}
             for i in range(GATE_LINES)]
    with open(sdd / "metrics" / "quality_gates.jsonl", "w") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    (sdd / "backlog" / "open" / TICKET).write_text(
        "id: alpha\ntitle: Alpha ticket\ndescription: d\nrole: backend\n")
    (sdd / "runtime" / "gates" / "T-0001.json").write_text(json.dumps(
        {"task_id": "T-0001", "overall_pass": True, "results": []}))
    return root


def tree(root: Path) -> dict[str, Any]:
    """Every entry under `root` (links not followed): each file's size, mtime and sha256,
    each directory's mtime and listing, each link's target."""
    out: dict[str, Any] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        info = os.lstat(here)
        out[str(here.relative_to(root)) + "/"] = (info.st_mtime_ns, sorted(dirs + files))
        for name in dirs + files:
            path = here / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                out[str(path.relative_to(root))] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                out[str(path.relative_to(root))] = (
                    info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode),
                    hashlib.sha256(path.read_bytes()).hexdigest())
    return out


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two `tree`s, by name."""
    return sorted(name for name in before.keys() | after.keys()
                  if before.get(name) != after.get(name))


def until(check: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


