"""quality_gates.jsonl read megabytes at a time through Polars (sdd/gate_frame.py) makes
the same State as reading it line by line: the same counts, totals, sparklines, latest
line per task and gate (in the same order, each value to the last bit) and problems.
Polars is laxer than the line path in ways a hostile file could use (a number read as a
string, the first of two equal keys kept, null read as absent): each such line must
leave the whole read to the line path.

The size below which a read is not worth a frame is set to 0 here, so that small files
exercise the frame path too."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.model import GateLine
from console.sdd import gate_frame
from console.sdd.delta import Delta
from console.sdd.fields import to_epoch
from console.sdd.paths import Kind
from console.sdd.state import State
from console.sdd.tail import MAX_LINE_BYTES, Block, JsonlTail
from tests.tail_read import read_kind
from tests.test_gate_lines import LINES, _seen

PLAIN = {"timestamp": "2026-01-01T00:00:00+00:00", "task_id": "T1", "gate": "lint",
         "result": "pass", "status": "pass", "duration_ms": 5, "cached": False,
         "required": True}


MIN_FRAME_BYTES = gate_frame.MIN_FRAME_BYTES


@pytest.fixture(autouse=True)
def _frames_for_any_size(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(gate_frame, "MIN_FRAME_BYTES", 0)
    yield


def _lines(count: int = 60) -> list[dict[str, Any]]:
    """Lines as Bernstein writes them: tasks and gates interleaved, some repeated."""
    return [{**PLAIN, "task_id": f"T{i % 7}", "gate": ("lint", "tests", "pii_scan")[i % 3],
             "status": ("pass", "fail", "skipped", "warn")[i % 4], "duration_ms": i,
             "timestamp": f"2026-03-0{1 + i % 9}T10:00:{i % 60:02d}.{i:06d}+00:00",
             "cached": i % 5 == 0} for i in range(count)]


def _write(path: Path, rows: list[bytes]) -> Path:
    path.write_bytes(b"".join(row + b"\n" for row in rows))
    return path


def _encoded(rows: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(row).encode() for row in rows]


def _both(path: Path, step: int = 1 << 20) -> tuple[State, State]:
    fast, _ = read_kind(path, Kind.GATE_LINES, blocks=True, step=step)
    slow, _ = read_kind(path, Kind.GATE_LINES, blocks=False, step=step)
    return fast, slow


def _framed(data: bytes) -> bool:
    """Whether the frame path takes these lines (else: block, then line by line)."""
    blocks, start = [], 0
    while start < len(data):  # (whole lines, a megabyte or so a block, as a tail reads)
        end = data.rfind(b"\n", start, start + (1 << 20)) + 1 or data.index(b"\n", start) + 1
        blocks.append(Block(1, data[start:end], lines=data.count(b"\n", start, end)))
        start = end
    prepared = gate_frame.prepare(blocks, MAX_LINE_BYTES)
    return prepared is not None and gate_frame.apply(State(), prepared, Delta())


def test_what_bernstein_writes_is_read_as_frames_and_is_the_line_path(tmp_path: Path) -> None:
    rows = _encoded(_lines())
    assert _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows), step=700)
    assert _seen(fast) == _seen(slow)
    assert fast.gate_pending == []  # (read: flushed into GateLines, in first-run order)
    assert all(type(line) is GateLine for row in fast.gate_latest.values()
               for line in row.values())
    assert list(fast.gate_latest) == [f"T{i}" for i in range(7)]


def test_compact_json_is_read_as_frames_too(tmp_path: Path) -> None:
    rows = [json.dumps(row, separators=(",", ":")).encode() for row in _lines()]
    assert _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


#: lines Polars would read otherwise than the line path (or that the line path refuses):
#: each sends its whole read to the line path, and the State is the line path's
HOSTILE = [
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "result": 5}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "result": true}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "result": ["pass"]}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "result": {"a": "b"}}',
    b'{"task_id": 5, "gate": "lint", "status": "pass"}',
    b'{"task_id": "T1", "gate": ["lint"], "status": "pass"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": 1767225600}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": ["2026-01-01T00:00:00Z"]}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "gate": "tests"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "cached": true, "cached": null}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "cached": true, "cached": false}',
    b'{"task_id": "T1", "gate" : "lint", "status": "pass", "gate":"tests"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "cached": null}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "extra": null}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "extra": 1, "gate": "tests"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "extra": 1, "extra": 2}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "*": "a:b"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "^.*$": "a:b"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "^timestamp$": 1}',
    b'{"task_id": "T1", "gate": "lint", "status": "PASS"}',
    b'{"task_id": "T1", "gate": "lint", "status": null}',
    b'{"task_id": "T1", "gate": "lint"}',
    b'{"task_id": "", "gate": "lint", "status": "pass"}',
    b'{"task_id": " T1", "gate": "lint", "status": "pass"}',
    b'{"task_id": "T1", "gate": "_lint", "status": "pass"}',
    b'{"task_id": "T:1", "gate": "lint", "status": "pass"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "result": "a:b"}',
    b'{"task_id": "T\\u0031", "gate": "lint", "status": "pass"}',
    b'{"task_id": "T\xc3\xa2che", "gate": "lint", "status": "pass"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "duration_ms": 1.0}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "duration_ms": "5"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "duration_ms": 99999999999999999999}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "duration_ms": 2199023255552}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass",'
    b' "duration_ms": -9223372036854775808}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "cached": 1}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": "2026-01-01 00:00:00"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": "2026-02-29T00:00:00Z"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": "0000-01-01T00:00:00Z"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass", "timestamp": "2026-01-01T00:00:00.1Z"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass",'
    b' "timestamp": "2026-01-01T00:00:00+01:00"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass"} {"task_id": "T2"}',
    b'{"task_id": "T1", "gate": "lint", "status": "pass",}',
    b"",
    b"   ",
    b"[1]",
    b"not json",
]


@pytest.mark.parametrize("odd", HOSTILE, ids=range(len(HOSTILE)))
def test_a_line_polars_would_misread_sends_the_read_line_by_line(tmp_path: Path,
                                                                odd: bytes) -> None:
    rows = _encoded(_lines(20))
    rows.insert(11, odd)
    assert not _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


#: keys of no one's, as Bernstein 3.23 writes a gate's metadata into its line: read as
#: frames all the same (Polars reads them as strings, to count their colons)
OTHER_KEYS = [
    b'"command": "ruff check ."', b'"mutation_score": 0.82',
    b'"verdict": "approve", "model": "opus"', b'"reason": "flaky: retried", "actor": "cli"',
    b'"extra": {"gate": "tests"}', b'"extra": 1', b'"x": [1, "a:b", {"c": "d:e"}]',
    b'"x": {}', b'"x": ""', b'"x": true', b'"x": 123456789012345678901234567890',
]


@pytest.mark.parametrize("other", OTHER_KEYS, ids=range(len(OTHER_KEYS)))
def test_lines_with_keys_of_no_ones_are_read_as_frames(tmp_path: Path, other: bytes) -> None:
    rows = _encoded(_lines(20))
    rows[3] = rows[3][:-1] + b", " + other + b"}"
    assert _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


def test_a_key_only_later_lines_have_costs_a_second_parse_not_the_frames(
        tmp_path: Path) -> None:
    rows = _encoded(_lines(gate_frame.SAMPLE_LINES + 40))
    late = gate_frame.SAMPLE_LINES + 20
    rows[late] = rows[late][:-1] + b', "reason": "bypassed: by hand", "actor": "cli"}'
    assert _framed(b"".join(row + b"\n" for row in rows))
    rows[late + 1] = rows[late + 1][:-1] + b', "reason": null}'  # (a colon unaccounted)
    assert not _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


def test_more_keys_of_no_ones_than_a_frame_takes_go_line_by_line(tmp_path: Path) -> None:
    rows = _encoded(_lines(20))
    rows[2] = rows[2][:-1] + b"".join(
        b', "k%d": 1' % i for i in range(gate_frame.MAX_OTHER_KEYS + 1)) + b"}"
    assert not _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


JSON_SCALARS = (st.booleans() | st.integers() | st.floats(allow_nan=False) | st.none()
                | st.text(st.sampled_from('ab:{}[], gate'), max_size=8))
OTHER_VALUE = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(["gate", "a", "b:c"]), inner,
                                             max_size=3), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(others=st.lists(st.tuples(st.integers(0, 29), st.sampled_from(
    ["command", "x", "mutation_score"] * 6 + ["gate", "status", "cached", "result",
                                              "timestamp", "y:z"]),
    OTHER_VALUE), max_size=6))
def test_keys_of_no_ones_and_ours_again_read_as_the_line_path(
        tmp_path_factory, others: list[tuple[int, str, Any]]) -> None:
    """Other keys with any value (nested, with colons and quotes in strings, null), and
    GateLine's own keys a second time: frames or not, the line path's State."""
    rows = _encoded(_lines(30))
    for row, key, value in others:
        extra = json.dumps({key: value}).encode()[1:-1]
        rows[row] = rows[row][:-1] + b", " + extra + b"}"
    path = tmp_path_factory.mktemp("gates") / "quality_gates.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gate_frame, "MIN_FRAME_BYTES", 0)
        fast, slow = _both(_write(path, rows))
    assert _seen(fast) == _seen(slow)


def test_carriage_returns_read_as_the_line_path(tmp_path: Path) -> None:
    rows = [row + b"\r" for row in _encoded(_lines(30))]
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)


@settings(max_examples=300, deadline=None)
@given(lines=LINES, step=st.integers(min_value=40, max_value=3000))
def test_frames_are_line_by_line_whatever_the_lines(tmp_path_factory, lines: list[bytes],
                                                    step: int) -> None:
    with pytest.MonkeyPatch.context() as patch:  # (hypothesis: not the function fixture)
        patch.setattr(gate_frame, "MIN_FRAME_BYTES", 0)
        path = tmp_path_factory.mktemp("gates") / "quality_gates.jsonl"
        fast, slow = _both(_write(path, lines), step=step)
    assert _seen(fast) == _seen(slow)


STAMPS = st.builds(
    lambda when, fraction, zulu: f"{when.year:04d}-" + when.strftime("%m-%dT%H:%M:%S")
    + (f".{when.microsecond:06d}" if fraction else "") + ("Z" if zulu else "+00:00"),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
    st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(stamps=st.lists(STAMPS, min_size=1, max_size=30))
def test_timestamps_are_to_epoch_to_the_last_bit(tmp_path_factory, stamps: list[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gate_frame, "MIN_FRAME_BYTES", 0)
        rows = _encoded([{**PLAIN, "task_id": f"T{i}", "timestamp": stamp}
                         for i, stamp in enumerate(stamps)])
        data = b"".join(row + b"\n" for row in rows)
        framed = _framed(data)
        path = _write(tmp_path_factory.mktemp("gates") / "quality_gates.jsonl", rows)
        fast, _ = read_kind(path, Kind.GATE_LINES, blocks=True, step=1 << 20)
    if "-02-29T" not in data.decode():  # (Feb 29 goes line by line: CANONICAL_STAMP)
        assert framed
    for i, stamp in enumerate(stamps):
        assert fast.latest_gates(f"T{i}")["lint"].timestamp == to_epoch("timestamp", stamp)


def test_lines_after_frames_keep_the_order_of_the_line_path(tmp_path: Path) -> None:
    """A large file read as frames, then a few more lines as the engine appends them
    (and a truncation, read from the start again)."""
    path = _write(tmp_path / "quality_gates.jsonl", _encoded(_lines(50)))
    state, tail = State(), JsonlTail(path, path.name)

    def read() -> None:
        batch = tail.read(1 << 20, blocks=True)
        prepared = gate_frame.prepare(batch.blocks, batch.max_line_bytes) \
            if batch.blocks else None
        state.apply_jsonl(Kind.GATE_LINES, path.name, batch, prepared)

    read()
    assert state.gate_pending  # (nothing has read the latest lines yet)
    more = _encoded([{**PLAIN, "task_id": "T9"}, {**PLAIN, "task_id": "T3", "gate": "new"}])
    with path.open("ab") as handle:
        handle.write(b"".join(row + b"\n" for row in more))
    read()
    _, slow = _both(path)
    assert _seen(state) == _seen(slow)
    _write(path, _encoded(_lines(5)))  # truncated and rewritten
    read()
    _, slow = _both(path)
    assert _seen(state) == _seen(slow)


def test_without_polars_the_block_path_reads_everything(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_frame, "_polars", lambda: None)
    rows = _encoded(_lines())
    assert not _framed(b"".join(row + b"\n" for row in rows))
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows))
    assert _seen(fast) == _seen(slow)
    assert fast.gate_pending == []


def test_polars_is_imported_only_for_a_large_read(tmp_path: Path) -> None:
    """The first paint and a small project's load do not pay for Polars (~0.15 s)."""
    sdd = tmp_path / ".sdd" / "metrics"
    sdd.mkdir(parents=True)
    _write(sdd / "quality_gates.jsonl", _encoded(_lines(500)))
    code = ("import sys\nfrom pathlib import Path\nimport console.tui.app\n"
            "from console.sdd.source import LocalSource\n"
            f"source = LocalSource(Path({str(tmp_path)!r}), checkpoint_after=None)\n"
            "source.load()\nassert source.state.gate_stats['lint'].runs\n"
            "print('polars' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_read_of_megabytes_goes_by_frames_at_its_real_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above MIN_FRAME_BYTES, as a load reads (Polars' parallel multi-chunk reader)."""
    monkeypatch.setattr(gate_frame, "MIN_FRAME_BYTES", MIN_FRAME_BYTES)
    rows = _encoded(_lines(600)) * 40  # ~4.5 MB
    data = b"".join(row + b"\n" for row in rows)
    assert len(data) > 2 * MIN_FRAME_BYTES and _framed(data)
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows), step=8 << 20)
    assert _seen(fast) == _seen(slow)


def test_ever_new_keys_are_cut_rarely_and_read_as_the_line_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_frame, "PENDING_ROWS", 40)
    cuts: list[int] = []
    real = gate_frame.latest_lines
    monkeypatch.setattr(gate_frame, "latest_lines",
                        lambda frames: cuts.append(1) or real(frames))
    rows = _encoded([{**PLAIN, "task_id": f"N{i}"} for i in range(2000)])
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", rows), step=2000)
    assert _seen(fast) == _seen(slow)
    reads = len(b"".join(rows)) // 2000
    assert 2 <= len(cuts) <= 8 < reads  # (CUT_AFTER times what the last cut kept: log)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["T1", "T2", "A9", "zz"]),
                                   st.sampled_from(["lint", "tests", "x"])), min_size=1),
                min_size=1, max_size=5))
def test_latest_lines_are_each_keys_last_in_the_order_keys_first_came(
        reads: list[list[tuple[str, str]]]) -> None:
    """Over frames whose ids were first seen in other orders (their category codes)."""
    pl = gate_frame._polars()
    frames = [pl.DataFrame({"task_id": [t for t, _ in keys], "gate": [g for _, g in keys],
                            "n": [f"{r}.{i}" for i in range(len(keys))]},
                           schema={"task_id": pl.Categorical, "gate": pl.Categorical,
                                   "n": pl.String})
              for r, keys in enumerate(reads)]
    expected: dict[tuple[str, str], str] = {}
    for r, keys in enumerate(reads):
        for i, key in enumerate(keys):
            expected[key] = f"{r}.{i}"  # (a key keeps its first place, as a dict does)
    latest = gate_frame.latest_lines(frames)
    assert latest.select(pl.col("task_id", "gate").cast(pl.String), "n").rows() == [
        (*key, n) for key, n in expected.items()]


def test_whatever_polars_raises_the_lines_go_by_the_block_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise RuntimeError("a Polars error no one foresaw")

    monkeypatch.setattr(gate_frame, "_read", refuse)
    fast, slow = _both(_write(tmp_path / "quality_gates.jsonl", _encoded(_lines())))
    assert _seen(fast) == _seen(slow) and fast.problems == []


def test_polars_allocator_setting_is_not_left_for_the_processes_we_start() -> None:
    import os

    assert gate_frame._polars() is not None
    assert "_RJEM_MALLOC_CONF" not in os.environ


def test_polars_is_imported_once_when_threads_ask_at_once() -> None:
    """Reads are prepared on several threads (sdd/frame_reads.py): the first import sets
    the allocator's setting for its time alone, and no later call touches the
    environment while Polars runs on another thread."""
    code = """
import os, sys, threading
from console.sdd import gate_frame
imports = []
real = gate_frame._import_polars
gate_frame._import_polars = lambda: imports.append(1) or real()
seen = []
start = threading.Barrier(8)
def ask():
    start.wait()
    seen.append(gate_frame._polars())
threads = [threading.Thread(target=ask) for _ in range(8)]
for thread in threads: thread.start()
for thread in threads: thread.join()
assert len(imports) == 1 and len({id(m) for m in seen}) == 1, (imports, seen)
assert hasattr(seen[0], "read_ndjson") and "_RJEM_MALLOC_CONF" not in os.environ
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "ok"


def test_frames_touch_their_tasks_once_when_the_read_ends(tmp_path: Path) -> None:
    """A console loading a large project makes each row again once for the gate lines,
    not at every 8 MB read (rows_for over every task, each time)."""
    path = _write(tmp_path / "quality_gates.jsonl", _encoded(_lines(60)))
    state, tail = State(), JsonlTail(path, path.name)
    batch = tail.read(1 << 20, blocks=True)
    prepared = gate_frame.prepare(batch.blocks, batch.max_line_bytes)
    delta = state.apply_jsonl(Kind.GATE_LINES, path.name, batch, prepared)
    assert prepared is not None and delta.touched == set() and "gates" in delta.sections
    assert state.gate_frames_read().touched == {f"T{i}" for i in range(7)}
    assert state.gate_frames_read().touched == set()


def test_a_view_during_a_read_does_not_make_the_frames_lines(tmp_path: Path) -> None:
    """The console's detail pane and rows read latest_gates on the event loop while a
    large load runs: that must not turn every pending frame into GateLines there."""
    path = _write(tmp_path / "quality_gates.jsonl", _encoded(_lines(60)))
    state, tail = State(), JsonlTail(path, path.name)
    batch = tail.read(1 << 20, blocks=True)
    state.apply_jsonl(Kind.GATE_LINES, path.name, batch,
                      gate_frame.prepare(batch.blocks, batch.max_line_bytes))
    assert state.latest_gates("T1") == {} and state.gate_pending  # (not yet: still read)
    assert state.gate_frames_read().touched >= {"T1"}
    _, slow = _both(path)
    assert state.latest_gates("T1") == slow.latest_gates("T1") != {}
