"""The owner of Bernstein's progress and heartbeat files (`console/sdd/task_live.py`):
what our engine writes is what Bernstein's server replays, and a hostile file is read
bounded, through no link, with one line saying why when it is not shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.sdd.task_live import (
    HEARTBEAT_BYTES,
    MAX_ENTRIES,
    PROGRESS_TAIL_BYTES,
    append_progress,
    read_heartbeat,
    read_local,
    read_progress,
    write_heartbeat,
)


def _project(tmp_path: Path) -> Path:
    (tmp_path / ".sdd" / "runtime").mkdir(parents=True)
    return tmp_path


def test_progress_round_trip_in_bernsteins_entry_format(tmp_path: Path) -> None:
    root = _project(tmp_path)
    append_progress(root, "T1", "half way", 50)
    append_progress(root, "T1", "over the top", 250)
    lines = (root / ".sdd/runtime/progress/T1.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["kind"] == "entry" and first["percent"] == 50
    assert isinstance(first["timestamp"], float)
    entries, problem = read_progress(root, "T1")
    assert problem is None
    assert [e["percent"] for e in entries] == [50, 100]  # clamped to what Bernstein means


def test_a_huge_progress_file_is_read_from_its_end_only(tmp_path: Path) -> None:
    root = _project(tmp_path)
    path = root / ".sdd/runtime/progress/T2.jsonl"
    path.parent.mkdir()
    line = json.dumps({"kind": "entry", "timestamp": 1.0, "message": "x" * 200,
                       "percent": 1}) + "\n"
    path.write_text(line * (4 * PROGRESS_TAIL_BYTES // len(line)) + json.dumps(
        {"kind": "entry", "timestamp": 2.0, "message": "last", "percent": 99}) + "\n")
    entries, problem = read_progress(root, "T2")
    assert problem is None and entries[-1]["message"] == "last"
    assert len(entries) == MAX_ENTRIES


def test_links_fifos_and_oversized_heartbeats_are_refused_in_one_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text('{"kind": "entry", "message": "SECRET", "percent": 1}\n')
    (root / ".sdd/runtime/progress").mkdir()
    (root / ".sdd/runtime/progress/T3.jsonl").symlink_to(secret)
    entries, problem = read_progress(root, "T3")
    assert entries == [] and problem and "\n" not in problem and "T3.jsonl" in problem
    beats = root / ".sdd/runtime/heartbeats"
    beats.mkdir()
    os.mkfifo(beats / "fifo-1.json")
    beat, problem = read_heartbeat(root, "fifo-1")  # would hang a blocking reader
    assert beat is None and problem and "fifo-1.json" in problem
    (beats / "big.json").write_text('{"message": "' + "a" * HEARTBEAT_BYTES + '"}')
    beat, problem = read_heartbeat(root, "big")
    assert beat is None and problem and "limit" in problem
    beat, problem = read_heartbeat(root, "../../../etc/passwd")
    assert beat is None and problem and "\n" not in problem


def test_read_local_names_the_session_and_keeps_what_it_can(tmp_path: Path) -> None:
    root = _project(tmp_path)
    write_heartbeat(root, "backend-1", "gates", "quality gates running", 60)
    live = read_local(root, "T4", {"session": "backend-1", "log": "../../etc/passwd"})
    assert live.heartbeat is not None and live.heartbeat["phase"] == "gates"
    assert live.heartbeat["progress_pct"] == 60 and live.progress == ()
    assert live.log is not None and live.log.startswith("(log not shown")
