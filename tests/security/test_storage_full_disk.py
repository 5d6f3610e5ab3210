"""#15.6 and #15.7: a full disk is an error, not a crash; every request gets an answer.

The full disk is real: the project lives on a small tmpfs mounted for the test (root
can mount here; where the machine does not allow it the test is skipped, saying so).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import append, run_cli, task_record


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(disk: Path) -> Path:
    """Fill the file system to the last byte; returns the filler to delete later."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 8, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


def _wait(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _lines_whole(path: Path) -> list[dict]:
    """Every line of a JSONL file parses: no torn line was left behind."""
    data = path.read_bytes() if path.exists() else b""
    assert not data or data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def test_engine_stops_dispatching_on_a_full_disk_and_resumes(small_disk: Path) -> None:
    from console.engine.engine import Engine
    from tests.engine_kit import make_repo

    root = make_repo(small_disk)
    staged = small_disk / "staged.yaml"
    staged.write_text("id: T1\ntitle: after the disk fills\ndescription: write out.txt hi\n")
    heard: list[str | None] = []
    engine = Engine(root, on_write_problem=heard.append, fsync=False)
    engine.start()
    try:
        filler = _fill(small_disk)
        os.rename(staged, root / ".sdd" / "backlog" / "open" / "t1.yaml")  # needs no block
        _wait(lambda: heard)
        problem = heard[0]
        assert problem is not None and "\n" not in problem
        assert "No space left on device" in problem and "cannot write .sdd/" in problem
        time.sleep(1.0)  # ticks go by: nothing is dispatched, nothing is torn
        assert not engine.running
        waiter = threading.Thread(target=lambda: idle.append(engine.run_until_idle()))
        idle: list[bool] = []
        waiter.start()
        waiter.join(60)
        assert idle == [False]  # stopped, not idle; and it did not wait for space
        assert _lines_whole(root / ".sdd" / "runtime" / "tasks.jsonl") == []
        assert (root / ".sdd" / "backlog" / "open" / "t1.yaml").exists()  # nothing lost
        filler.unlink()
        _wait(lambda: heard[-1] is None)
        assert engine.run_until_idle(timeout=120)
    finally:
        engine.stop()
    records = _lines_whole(root / ".sdd" / "runtime" / "tasks.jsonl")
    assert records[-1]["id"] == "T1" and records[-1]["status"] == "done"
    assert (root / "out.txt").read_text().strip() == "hi"
    events = [r["message"] for r in _lines_whole(root / ".sdd/runtime/engine_events.jsonl")]
    assert "writes to .sdd/ work again; dispatching resumes" in events


def test_run_on_a_full_disk_exits_with_one_line(small_disk: Path) -> None:
    from tests.engine_kit import make_repo, ticket

    root = make_repo(small_disk)
    ticket(root, "t1", id="T1", title="never starts", description="write out.txt hi")
    _fill(small_disk)
    result = run_cli("-C", str(root), "run", "--until-idle", timeout=120)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bernstein-tui: cannot write .sdd/")
    assert "No space left" in lines[0]
    assert (root / ".sdd" / "backlog" / "open" / "t1.yaml").exists()  # nothing lost
    _lines_whole(root / ".sdd" / "runtime" / "tasks.jsonl")


HOLDER = """
import sys, time
from pathlib import Path
from console.engine.lock import EngineLock
from console.sdd.paths import SddPaths
EngineLock(SddPaths(Path(sys.argv[1]))).acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_request_to_an_engine_that_dies_is_answered_at_once(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl", task_record("T1", "failed"))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(project), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = run_cli("-C", str(project), "retry", "T1", timeout=60)
    finally:
        holder.kill()
    assert result.returncode == 1
    assert result.stderr.strip().endswith("stopped before answering; nothing was done")
    assert "did not answer within" not in result.stderr
    inbox = project / ".sdd" / "runtime" / "control" / "inbox"
    assert not list(inbox.glob("*.json"))  # the request does not wait for the next engine
