"""A file rewritten in place with its mtime put back is never served from the
checkpoint (issue #32 point 7): anyone who can write a project can set a file's mtime
(os.utime), so a file the same size with the same mtime is not "unchanged"; the ctime,
which only the kernel sets, says it was written. Checkpointed by a real `status --json`,
rewritten, then shown again by `status --json` and by the console's source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.sdd.paths import Kind, SddPaths
from console.sdd.source import LocalSource
from tests.security.looking_kit import PER_STATE, TICKET, make_project


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    return dict(os.environ)


def status_json(env: dict[str, str], root: Path) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-m", "console", "-C", str(root), "status",
                          "--json"], capture_output=True, text=True, timeout=120, env=env,
                         cwd="/", check=True).stdout
    return json.loads(out)["tasks"]["by_state"]


def rewrite_keeping_mtime(path: Path, old: bytes, new: bytes) -> None:
    """`old` (its first occurrence past the file's middle) becomes `new`, the same size,
    in place (same inode), and the file's atime and mtime are put back."""
    assert len(old) == len(new)
    info = os.stat(path)
    data = bytearray(path.read_bytes())
    at = data.index(old, len(data) // 2 if len(data) > 8192 else 0)
    data[at:at + len(old)] = new
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        info.st_ino, info.st_size, info.st_mtime_ns)


def test_a_rewrite_with_its_mtime_put_back_is_read_again(
        tmp_path: Path, env: dict[str, str]) -> None:
    root = make_project(tmp_path)
    paths = SddPaths(root)
    assert status_json(env, root)["open"] == PER_STATE  # cold; checkpointed
    assert paths.checkpoint.is_file()

    tasks = paths.of(Kind.TASKS)  # a task in the middle of the log: open → done
    assert os.path.getsize(tasks) > 3 * 4096  # (past the first bytes and the last 4 KB
    # before the offset, which the checkpoint compares)
    rewrite_keeping_mtime(tasks, b'"status": "open"', b'"status": "done"')
    ticket = paths.backlog_open / TICKET
    rewrite_keeping_mtime(ticket, b"Alpha ticket", b"Omega ticket")

    by_state = status_json(env, root)
    assert (by_state["open"], by_state["done"]) == (PER_STATE - 1, PER_STATE + 1)

    source = LocalSource(root)  # as the console reads it
    source.load()
    assert Kind.GATE_LINES in source.restored  # (the checkpoint was used: 4 MB not read)
    assert Kind.TASKS not in source.restored and Kind.TICKET not in source.restored
    assert [t.title for t in source.state.tickets.values()] == ["Omega ticket"]
    assert sum(t.status == "open" for t in source.state.tasks.values()) == PER_STATE - 1
