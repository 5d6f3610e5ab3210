"""The watcher thread turns writes by another process into deltas."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.sdd.source import LocalSource
from console.sdd.state import Delta
from tests.conftest import task_record

WRITER = """
import json, sys, time
from pathlib import Path

import pytest
from console.sdd.fileio import append_jsonl
path = Path(sys.argv[1])
for i in range(int(sys.argv[2])):
    append_jsonl(path, [json.loads(sys.argv[3]) | {"id": f"w{i}"}])
    time.sleep(0.01)
"""


def _collect(deltas: queue.Queue[Delta], want: set[str], timeout: float = 10.0) -> set[str]:
    seen: set[str] = set()
    while not want <= seen:
        delta = deltas.get(timeout=timeout)
        seen |= delta.upserts.keys()
    return seen


def test_another_process_appending_reaches_the_callback(project: Path) -> None:
    deltas: queue.Queue[Delta] = queue.Queue()
    source = LocalSource(project)
    source.start(deltas.put)
    try:
        assert source.loaded.wait(5)
        tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, str(tasks), "20", json.dumps(task_record("x"))],
            timeout=60)
        assert writer.returncode == 0
        assert {f"w{i}" for i in range(20)} <= _collect(deltas, {f"w{i}" for i in range(20)})
        assert len(source.state.tasks) == 20
        assert source.state.chains_by_task is not None  # (built after the load, here)
    finally:
        source.stop()


def test_sdd_created_later_and_removed_is_followed(tmp_path: Path) -> None:
    deltas: queue.Queue[Delta] = queue.Queue()
    source = LocalSource(tmp_path)
    source.start(deltas.put)
    try:
        first = deltas.get(timeout=5)
        assert not first  # said at once: no .sdd/ yet
        runtime = tmp_path / ".sdd" / "runtime"
        runtime.mkdir(parents=True)
        (runtime / "tasks.jsonl").write_text(json.dumps(task_record("late")) + "\n")
        _collect(deltas, {"late"})
        shutil.rmtree(tmp_path / ".sdd")
        while True:
            delta = deltas.get(timeout=10)
            if "late" in delta.removed:
                break
        assert source.state.tasks == {}
    finally:
        source.stop()


def test_a_large_load_is_frozen_out_of_the_collectors_sight(project: Path,
                                                              monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Past FREEZE_AFTER_BYTES the loaded records are moved out of the collector's
    generations (gc.freeze), so a full collection never scans them again."""
    import gc

    from console.sdd import watcher

    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(task_record(f"t{i}")) + "\n" for i in range(300)))
    gc.unfreeze()
    monkeypatch.setattr(watcher, "FREEZE_AFTER_BYTES", tasks.stat().st_size)
    source = LocalSource(project)
    source.start(lambda delta: None)
    try:
        assert source.loaded.wait(10)
        assert gc.get_freeze_count() > 0
        task = source.state.tasks["t7"]
        assert all(obj is not task for obj in gc.get_objects())  # not in any generation
    finally:
        source.stop()
        gc.unfreeze()

    small = LocalSource(project)  # under the threshold: left to the collector
    monkeypatch.setattr(watcher, "FREEZE_AFTER_BYTES", 10 * tasks.stat().st_size)
    small.start(lambda delta: None)
    try:
        assert small.loaded.wait(10)
        assert gc.get_freeze_count() == 0
    finally:
        small.stop()


BURST_WRITER = """
import json, sys, time
from pathlib import Path

import pytest
path = Path(sys.argv[1])
started = time.monotonic()
with open(path, "a", encoding="utf-8") as handle:
    for i in range(int(sys.argv[2])):
        handle.write(json.dumps(json.loads(sys.argv[3]) | {"id": f"b{i}"}) + "\\n")
        handle.flush()
        time.sleep(0.001)
print(time.monotonic() - started)
"""


def test_a_burst_reaches_the_callback_in_slices_and_loses_nothing(project: Path) -> None:
    """Writes a millisecond apart from another process: in a burst the watcher reads at
    most once per BURST_SLICE_S, so the deltas (and the console's repaints) are few."""
    from console.sdd.watcher import BURST_SLICE_S

    deltas: queue.Queue[Delta] = queue.Queue()
    source = LocalSource(project)
    source.start(deltas.put)
    try:
        assert source.loaded.wait(5)
        while not deltas.empty():
            deltas.get()
        tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
        writer = subprocess.run(
            [sys.executable, "-c", BURST_WRITER, str(tasks), "400",
             json.dumps(task_record("x"))], capture_output=True, text=True, timeout=60)
        assert writer.returncode == 0, writer.stderr
        took = float(writer.stdout)
        want = {f"b{i}" for i in range(400)}
        seen: set[str] = set()
        batches = 0
        while not want <= seen:
            delta = deltas.get(timeout=10)
            if delta.upserts:
                batches += 1
                seen |= delta.upserts.keys()
        # one batch may start the burst, one may end it; the rest are slices
        assert batches <= took / BURST_SLICE_S + 3, (batches, took)
        assert len(source.state.tasks) == 400
    finally:
        source.stop()


def test_a_load_hands_its_steps_over_at_most_every_load_send_s(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each hand-over makes again the rows of every task it touched: a load of many
    steps goes to the console as its first step (the first rows, at once) and then at
    most one delta every LOAD_SEND_S, with nothing lost."""
    from console.sdd import source as source_module
    from console.sdd import watcher

    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    tasks.parent.mkdir(parents=True, exist_ok=True)
    with tasks.open("a") as handle:
        for i in range(400):
            handle.write(json.dumps(task_record(f"t{i}")) + "\n")
    monkeypatch.setattr(source_module, "LOAD_STEP_BYTES", 4096)  # ~30 steps
    monkeypatch.setattr(source_module, "FIRST_TASKS_BYTES", 4096)
    monkeypatch.setattr(watcher, "LOAD_SEND_S", 60.0)
    deltas: queue.Queue[Delta] = queue.Queue()
    source = LocalSource(project)
    source.start(deltas.put)
    try:
        assert source.loaded.wait(10)
        got = [deltas.get(timeout=5) for _ in range(3)]
        assert [bool(d) for d in got] == [True, True, False]  # first, the rest, "loaded"
        assert len(got[0].upserts) < 400
        assert got[0].upserts.keys() | got[1].upserts.keys() == {f"t{i}" for i in range(400)}
    finally:
        source.stop()
