"""A large read of the gate lines, pipelined over worker threads (sdd/frame_reads.py),
makes the State that reading it one step after the other makes, folds every read the
tail is past even when the load stops, and reports a read that fails as the file's
problem, keeping what was read before it.

The size below which a read is not worth a frame, and the load's step, are made small
here, so that small files go through the pipeline too."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.sdd import frame_reads, gate_frame
from console.sdd import source as source_module
from console.sdd.kinds import KINDS, FrameReader
from console.sdd.paths import Kind
from console.sdd.source import LocalSource
from console.sdd.state import State
from console.sdd.tail import JsonlTail
from tests.tail_read import read_kind
from tests.test_gate_lines import _seen

STEP = 4096


@pytest.fixture(autouse=True)
def _small_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(gate_frame, "MIN_FRAME_BYTES", 0)
    monkeypatch.setattr(source_module, "LOAD_STEP_BYTES", STEP)
    yield


def _gates(root: Path, count: int = 900, bad_every: int = 0) -> Path:
    """Lines as Bernstein writes them (tasks and gates interleaved, some repeated), now
    and then one the line path refuses (its read then goes block by block)."""
    path = root / ".sdd" / "metrics" / "quality_gates.jsonl"
    path.parent.mkdir(parents=True)
    rows = []
    for i in range(count):
        row = {"timestamp": f"2026-03-0{1 + i % 9}T10:00:{i % 60:02d}.{i:06d}+00:00",
               "task_id": f"T{i % 37}", "gate": ("lint", "tests", "pii_scan")[i % 3],
               "result": "pass", "status": ("pass", "fail", "skipped", "warn")[i % 4],
               "duration_ms": i, "cached": i % 5 == 0, "required": True}
        if bad_every and i % bad_every == bad_every - 1:
            row.pop("status")
        rows.append(json.dumps(row))
    path.write_text("".join(row + "\n" for row in rows))
    return path


def _fail(monkeypatch: pytest.MonkeyPatch, owner: type, name: str, nth: int,
          message: str) -> list[int]:
    """`owner.name` raises RuntimeError(message) at its `nth` call; the calls, counted."""
    real = getattr(owner, name)
    calls: list[int] = []

    def failing(self: object, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == nth:
            raise RuntimeError(message)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, failing)
    return calls


def _folded_to_offset(source: LocalSource, path: Path) -> int:
    """The gate lines the State holds: every one before the tail's offset."""
    runs = sum(stats.runs for stats in source.state.gate_stats.values())
    assert runs == path.read_bytes()[:source.tails[Kind.GATE_LINES].offset].count(b"\n")
    return runs


def _named(state: State) -> dict[str, object]:
    """_seen, each problem's file by its name (as tail_read.read_kind names it)."""
    seen = _seen(state)
    return {**seen, "problems": [(Path(file).name, line, reason)
                                 for file, line, reason in seen["problems"]]}


def _pipelined(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pipelines the source runs."""
    runs: list[int] = []
    real = frame_reads.pipelined

    def counted(*args: object, **kwargs: object) -> Iterator[frame_reads.Read]:
        runs.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(frame_reads, "pipelined", counted)
    return runs


@pytest.mark.parametrize("bad_every", [0, 97])
def test_pipelined_reads_make_the_state_of_one_read_after_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad_every: int) -> None:
    path = _gates(tmp_path, bad_every=bad_every)
    runs = _pipelined(monkeypatch)
    source = LocalSource(tmp_path, checkpoint_after=None)
    ahead: list[int] = []
    source.load(on_step=lambda delta: ahead.append(source._ahead.bytes))
    assert runs == [1]
    assert max(ahead) > 0 and source._ahead.bytes == 0  # (read ahead, then all folded)
    one_by_one, _ = read_kind(path, Kind.GATE_LINES, blocks=True, step=STEP)
    line_by_line, _ = read_kind(path, Kind.GATE_LINES, blocks=False, step=STEP)
    assert _named(source.state) == _seen(one_by_one) == _seen(line_by_line)
    assert bool(source.state.problems) == bool(bad_every)


def test_a_small_read_is_not_pipelined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _gates(tmp_path, count=10)
    runs = _pipelined(monkeypatch)
    source = LocalSource(tmp_path, checkpoint_after=None)
    source.load()
    assert runs == [] and source.state.gate_stats["lint"].runs == 4


def test_a_stop_folds_every_read_the_tail_is_past(tmp_path: Path) -> None:
    path = _gates(tmp_path)
    source = LocalSource(tmp_path, checkpoint_after=None)
    steps = []

    def step(delta: object) -> None:
        steps.append(delta)
        source.stopping.set()  # (as a console quitting mid-load)

    source.load_kinds([])  # (nothing: the tails are fresh)
    source._read_all(Kind.GATE_LINES, step)
    assert source.tails[Kind.GATE_LINES].offset < path.stat().st_size  # (stopped early
    assert _folded_to_offset(source, path) > 0  # ... with every line it read folded)


def test_a_read_that_fails_is_the_files_problem_and_what_came_before_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _gates(tmp_path)
    _fail(monkeypatch, JsonlTail, "read", 3, "the disk said no")
    source = LocalSource(tmp_path, checkpoint_after=None)
    source._read_all(Kind.GATE_LINES, lambda delta: None)
    assert [(p.file, p.reason) for p in source.state.problems] == [
        (".sdd/metrics/quality_gates.jsonl", "unreadable: RuntimeError: the disk said no")]
    assert _folded_to_offset(source, path) > 0  # (the two reads before)


def test_a_step_that_raises_still_leaves_every_read_taken_folded(tmp_path: Path) -> None:
    path = _gates(tmp_path)
    source = LocalSource(tmp_path, checkpoint_after=None)

    def step(delta: object) -> None:
        raise RuntimeError("the console's handler failed")

    with pytest.raises(RuntimeError):
        source._read_all(Kind.GATE_LINES, step)
    assert source.tails[Kind.GATE_LINES].offset < path.stat().st_size
    assert _folded_to_offset(source, path) > 0 and source._ahead.bytes == 0


def test_a_fold_that_fails_stops_the_reads_after_it(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """As one read after the other stops at a read the State could not take."""
    path = _gates(tmp_path)
    calls = _fail(monkeypatch, State, "apply_jsonl", 2, "a bug in a fold")
    source = LocalSource(tmp_path, checkpoint_after=None)
    problems: list[str] = []
    source._read_all(Kind.GATE_LINES, lambda delta: problems.extend(
        p.reason for p in source.state.problems))
    assert "unreadable: RuntimeError: a bug in a fold" in problems
    assert source.tails[Kind.GATE_LINES].offset < path.stat().st_size
    assert len(calls) <= frame_reads.DEPTH + 1 and source._ahead.bytes == 0


def test_a_prepare_that_raises_one_read_at_a_time_leaves_its_lines_to_the_block_path(
        tmp_path: Path) -> None:
    path = _gates(tmp_path, count=20)
    real = KINDS[Kind.GATE_LINES].frame
    assert real is not None

    def broken(blocks: list, longest: int) -> object:
        raise RuntimeError("a Polars error no one foresaw")

    tail = JsonlTail(path, path.name)
    done = frame_reads.read(tail, FrameReader(broken, real.apply), None)
    assert done.error is None and done.prepared is None and done.batch is not None
    assert sum(block.lines for block in done.batch.blocks) == 20


def test_a_prepare_that_raises_leaves_its_lines_to_the_block_path(tmp_path: Path) -> None:
    path = _gates(tmp_path)
    real = KINDS[Kind.GATE_LINES].frame
    assert real is not None
    prepared: list[int] = []

    def flaky(blocks: list, longest: int) -> object:
        prepared.append(1)
        if len(prepared) % 2:
            raise RuntimeError("a Polars error no one foresaw")
        return real.prepare(blocks, longest)

    state, tail = State(), JsonlTail(path, path.name)
    for done in frame_reads.pipelined(tail, FrameReader(flaky, real.apply), STEP,
                                      threading.Event()):
        assert done.error is None and done.batch is not None
        state.apply_jsonl(Kind.GATE_LINES, path.name, done.batch, done.prepared)
    state.gate_frames_read()
    line_by_line, _ = read_kind(path, Kind.GATE_LINES, blocks=False, step=STEP)
    assert len(prepared) > 4 and _seen(state) == _seen(line_by_line)
