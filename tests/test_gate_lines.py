"""quality_gates.jsonl read a block at once (sdd/gate_lines.py, the large-project path)
makes the same State as reading it line by line through decode_gate_line: the same
counts, totals, sparklines, latest line per task and gate (in the same order), the same
problems on the same lines — whatever the lines hold and however the reads are cut."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sdd.delta import Delta
from console.sdd.gate_lines import RawGateLine
from console.sdd.paths import Kind
from console.sdd.state import State
from tests.tail_read import odd_lines, read_kind

ODD = st.sampled_from
GOOD_LINE = st.fixed_dictionaries({
    "task_id": ODD(["T1", "T2", "abc-3", "9x"]),
    "gate": ODD(["lint", "tests", "type_check"]),
    "status": ODD(["pass", "fail", "warn", "timeout", "skipped", "bypassed"]),
}, optional={
    "timestamp": ODD(["2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00.250000+00:00",
                      "2026-01-01T00:00:00Z", "2026-01-01 00:00:05", None,
                      "2026-02-28T23:59:59.999999+00:00", "2024-02-29T12:00:00+00:00",
                      "2026-01-31T00:00:00.1+00:00", "2026-12-31T00:00:00.123Z",
                      "2026-04-30T23:59:59+00:00", "2026-12-31T00:00:00.000001Z",
                      "2026-07-31T12:00:00+00:00", "0001-01-01T00:00:00+00:00"]),
    "result": ODD(["pass", "blocked", "flagged", None]),
    "duration_ms": st.integers(min_value=0, max_value=10_000) | st.none(),
    "cached": st.booleans() | st.none(),
    "required": st.booleans(),
    "extra": st.integers(),
})
#: odd values, most of which the strict shape refuses: each must read as line by line
ODD_VALUES = {
    "task_id": [" T1", "", "Tâche", 7, None, True, "-x", ["T1"]],
    "gate": ["", " lint", "lïnt", 3, None],
    "status": ["PASS", "ok", "", 1, None],
    "timestamp": ["2026-01-01t00:00:00z", "2026-01-01T00:00:00.1234567+00:00",
                  "1767225600", "20260101", "20260101T000000Z", "2026-13-01T00:00:00Z",
                  " 2026-01-01", "2026", "", 1767225600, 1767225600.5, True, "garbage",
                  "2026-01-01T00:00:00+00:00 ", "2026-01-01T00:00:00+05:30",
                  "2026-02-29T00:00:00+00:00", "2026-04-31T00:00:00Z", "2026-02-30T00:00:00Z",
                  "2026-01-01T00:00:00.1234567Z", "2026-01-01T00:00:00+00:00\n",
                  "0000-01-01T00:00:00Z", "2026-06-31T00:00:00+00:00",
                  "2026-11-31T00:00:00Z", "2026-02-29T00:00:00.000000+00:00"],
    "result": ["résultat", 5, "", True],
    "duration_ms": [-5, 2.0, 2.5, "12", "x", True, 10**30],
    "cached": ["true", "no", 1, 0],
    "required": ["false", None, 2],
}


JUNK = ODD([b"", b"  ", b"{not json", b"[1]", b"\xef\xbb\xbf{}",
            b'{"task_id": "T1", "gate": "lint", "status": "pass"} {}'])


#: mostly what Bernstein writes, now and then a line with one odd value, a key
#: missing, or not a gate line at all
GATE_LINE = odd_lines(GOOD_LINE, ODD_VALUES, JUNK, odd_one_in=26, drop_one_in=41)
LINES = st.lists(GATE_LINE, max_size=40)


def _read(path: Path, *, blocks: bool, step: int) -> tuple[State, Delta]:
    return read_kind(path, Kind.GATE_LINES, blocks=blocks, step=step)


def _seen(state: State) -> dict[str, Any]:
    return {
        "counts": {g: list(c.items()) for g, c in state.gate_counts.items()},
        "stats": {g: (s.runs, s.passed, s.skipped, s.cached, s.total_ms, list(s.recent))
                  for g, s in state.gate_stats.items()},
        "latest": {t: list(state.latest_gates(t).items()) for t in state.gate_tasks()},
        "problems": [(p.file, p.line, p.reason) for p in state.problems],
    }


@settings(max_examples=400, deadline=None)
@given(lines=LINES, step=st.integers(min_value=40, max_value=3000))
def test_a_block_at_once_is_line_by_line(tmp_path_factory, lines: list[bytes],
                                         step: int) -> None:
    path = tmp_path_factory.mktemp("gates") / "quality_gates.jsonl"
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    fast, fast_delta = _read(path, blocks=True, step=step)
    slow, slow_delta = _read(path, blocks=False, step=step)
    assert _seen(fast) == _seen(slow)
    assert fast_delta.touched == slow_delta.touched
    assert fast_delta.sections == slow_delta.sections


@pytest.mark.parametrize(("key", "value"), [
    (key, value) for key, values in sorted(ODD_VALUES.items())
    for value in values
])
def test_each_odd_value_reads_as_line_by_line(tmp_path: Path, key: str, value: Any) -> None:
    """Every odd value, the latest of its task and gate, between two plain lines."""
    plain = {"task_id": "T1", "gate": "lint", "status": "pass",
             "timestamp": "2026-01-01T00:00:00+00:00", "duration_ms": 5}
    path = tmp_path / "quality_gates.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in (
        {**plain, "task_id": "T0"}, {**plain, key: value}, {**plain, "gate": "tests"})))
    fast, _ = _read(path, blocks=True, step=1 << 20)
    slow, _ = _read(path, blocks=False, step=1 << 20)
    assert _seen(fast) == _seen(slow)


def test_the_large_path_is_taken_for_what_bernstein_writes(tmp_path: Path) -> None:
    """Lines as Bernstein writes them go in as blocks: no dict, no GateLine per line
    (the latest line of each task and gate stays raw until it is read)."""
    path = tmp_path / "quality_gates.jsonl"
    rows = [{"timestamp": f"2026-01-01T00:00:{i % 60:02d}+00:00", "task_id": f"t{i % 50}",
             "gate": ("lint", "tests")[i % 2], "result": "pass", "status": "pass",
             "duration_ms": i, "cached": i % 3 == 0, "required": True} for i in range(2000)]
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    state, delta = _read(path, blocks=True, step=1 << 20)
    raw = [line for row in state.gate_latest.values() for line in row.values()]
    assert raw and all(isinstance(line, RawGateLine) for line in raw)
    assert state.gate_stats["lint"].runs == 1000 and state.problems == []
    latest = state.latest_gates("t1")["tests"]
    assert (latest.duration_ms, latest.timestamp, latest.result) == (1951, 1767225631.0, "pass")
    assert len(delta.touched) == 50
