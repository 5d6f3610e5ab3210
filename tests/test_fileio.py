"""Atomic writes and locked whole-line appends, the only way .sdd/ is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.sdd.fileio import append_jsonl, atomic_write_json, read_json_object
from console.sdd.tail import JsonlTail

WRITER = """
import sys
from pathlib import Path
from console.sdd.fileio import append_jsonl
path, who, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    append_jsonl(path, [{"who": who, "i": i, "pad": "x" * (i % 50) * 97}], fsync=False)
"""


def test_concurrent_appenders_in_separate_processes_never_tear_a_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{k}", "300"])
             for k in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    batch = JsonlTail(path).read()
    assert batch.problems == []
    seen = {(r["who"], r["i"]) for _, r in batch.records}
    assert len(batch.records) == 1200 and len(seen) == 1200


def test_append_after_a_torn_line_closes_it_first(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"ok": 1}\n{"torn": ')  # a writer died mid-line
    append_jsonl(path, [{"ok": 2}])
    batch = JsonlTail(path, "log").read()
    assert [r for _, r in batch.records] == [{"ok": 1}, {"ok": 2}]
    assert [p.line for p in batch.problems] == [2]


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.json"
    atomic_write_json(path, {"b": 1, "a": [1, 2]})
    atomic_write_json(path, {"c": 3})
    assert json.loads(path.read_text()) == {"c": 3}
    assert os.listdir(path.parent) == ["report.json"]


def test_read_json_object_reports_each_bad_shape(tmp_path: Path) -> None:
    cases = {
        "ok.json": (b'{"a": 1}', None),
        "list.json": (b"[1]", "expected a JSON object, got list"),
        "bad.json": (b'{"a": ', "invalid JSON"),
        "utf.json": (b'{"a": "\xff"}', "invalid UTF-8"),
    }
    for name, (data, reason) in cases.items():
        (tmp_path / name).write_bytes(data)
        obj, problem = read_json_object(tmp_path / name, name)
        if reason is None:
            assert obj == {"a": 1} and problem is None
        else:
            assert obj is None and problem is not None and problem.reason.startswith(reason)
            assert problem.file == name
    assert read_json_object(tmp_path / "missing.json", "m") == (None, None)
    (tmp_path / "dir.json").mkdir()
    obj, problem = read_json_object(tmp_path / "dir.json", "dir.json")
    assert obj is None and problem is not None and "is a directory" in problem.reason
