"""Issue #32 point 8: a sparse or enormous JSONL file is never a minute of reading NUL
bytes. A hostile project (or agent) makes `.sdd/metrics/quality_gates.jsonl` a 100 GB
hole (`truncate -s 100G`) and puts a 100 GB hole between the task lines: reading the
holes' zeros took ~100 s each here. The reader skips holes by their extents
(`SEEK_DATA`), so `status --json` answers in well under a second, names each file once
in its problems, and counts the tasks on both sides of the hole."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import append, run_cli, task_record

HOLE = 100 * 1024 ** 3


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.truncate(size)
    if os.stat(path).st_blocks * 512 >= size:
        pytest.skip("this file system does not keep holes")


def test_status_skips_100_gb_holes_and_counts_the_lines_around_them(project: Path) -> None:
    gates = project / ".sdd" / "metrics" / "quality_gates.jsonl"
    _sparse(gates, HOLE)  # nothing but a hole, and no newline
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("before", "done"))
    first = tasks.stat().st_size
    _sparse(tasks, HOLE)  # the line after the first one: 100 GB of NUL bytes …
    append(tasks, "\n", task_record("after-1", "open"), task_record("after-2", "failed"))
    outside = sorted(p.name for p in project.parent.iterdir())

    started = time.monotonic()
    result = run_cli("-C", str(project), "status", "--json", timeout=60)
    took = time.monotonic() - started

    assert result.returncode == 0, result.stderr
    assert took < 30, f"status took {took:.1f} s"
    answer = json.loads(result.stdout)
    assert answer["tasks"]["total"] == 3  # the valid lines on both sides of the hole
    by_file = {(p["file"], p["line"]): p["reason"] for p in answer["problems"]}
    assert by_file == {
        (".sdd/runtime/tasks.jsonl", 2):
            f"line is {HOLE - first} bytes, over the 4194304-byte limit; skipped",
        (".sdd/metrics/quality_gates.jsonl", 1):
            f"line is over the 4194304-byte limit (at least {HOLE} bytes); skipped",
    }
    assert "\n" not in result.stderr.strip()  # no traceback
    assert sorted(p.name for p in project.parent.iterdir()) == outside
