"""The JSONL tail reader: offsets, half lines, bad lines, truncation, replacement."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from console.sdd.tail import JsonlTail


def line(obj: object) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def test_reads_only_new_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"a": 1}) + line({"a": 2}))
    tail = JsonlTail(path, "x.jsonl")
    batch = tail.read()
    assert [(n, r["a"]) for n, r in batch.records] == [(1, 1), (2, 2)]
    assert tail.read().records == []
    with open(path, "ab") as f:
        f.write(line({"a": 3}))
    assert [(n, r["a"]) for n, r in tail.read().records] == [(3, 3)]


def test_half_line_is_held_until_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": ')
    tail = JsonlTail(path)
    assert [r["a"] for _, r in tail.read().records] == [1]
    batch = tail.read()
    assert batch.records == [] and batch.problems == []
    with open(path, "ab") as f:
        f.write(b'2}\n')
    batch = tail.read()
    assert [(n, r["a"]) for n, r in batch.records] == [(2, 2)]
    assert batch.problems == []


def test_bad_lines_are_reported_with_line_numbers_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(
        line({"ok": 1}) + b"not json\n" + b"\xff\xfe\x00junk\n" + b"[1, 2]\n" + b"\n"
        + b"   \n" + line({"ok": 2}) + b'{"a": ' + b"[" * 100_000 + b"\n" + line({"ok": 3})
    )
    batch = JsonlTail(path, "x.jsonl").read()
    assert [r["ok"] for _, r in batch.records] == [1, 2, 3]
    reasons = {p.line: p.reason for p in batch.problems}
    assert set(reasons) == {2, 3, 4, 8}
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3].startswith("invalid UTF-8")
    assert reasons[4] == "expected a JSON object, got list"
    assert all(p.file == "x.jsonl" for p in batch.problems)


def test_ten_megabyte_line_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    big = line({"blob": "x" * (10 * 1024 * 1024)})
    path.write_bytes(line({"n": 1}) + big + line({"n": 2}))
    tail = JsonlTail(path, "x.jsonl", max_line_bytes=4 * 1024 * 1024)
    batch = tail.read()
    assert [r["n"] for _, r in batch.records] == [1, 2]
    assert len(batch.problems) == 1
    assert batch.problems[0].line == 2
    assert "over the 4194304-byte limit" in batch.problems[0].reason


def test_long_line_arriving_in_pieces_does_not_grow_memory(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    tail = JsonlTail(path, max_line_bytes=1000)
    path.write_bytes(b'{"x": "' + b"y" * 600)
    assert not tail.read().problems  # a half line under the limit: its writer is not done
    with open(path, "ab") as f:
        f.write(b"y" * 600)
    batch = tail.read()
    assert len(tail._pending) == 0  # dropped once over the limit
    # over the limit at the end of the file: said now, not only when (if) its newline comes
    assert [(p.line, p.reason) for p in batch.problems] == [
        (1, "line is over the 1000-byte limit (at least 1207 bytes); skipped")]
    with open(path, "ab") as f:
        f.write(b'"}\n' + line({"n": 1}))
    batch = tail.read()
    assert [r["n"] for _, r in batch.records] == [1]
    assert batch.problems == []  # that line was reported once


def test_truncation_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"n": 1}) + line({"n": 2}))
    tail = JsonlTail(path)
    tail.read()
    path.write_bytes(line({"n": 9}))  # shorter: truncated and rewritten
    batch = tail.read()
    assert batch.reset
    assert [(n, r["n"]) for n, r in batch.records] == [(1, 9)]


def test_replacement_by_rename_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"n": 1}))
    tail = JsonlTail(path)
    tail.read()
    other = tmp_path / "y.jsonl"
    other.write_bytes(line({"n": 5}) + line({"n": 6}) + line({"n": 7}))
    os.replace(other, path)
    batch = tail.read()
    assert batch.reset
    assert [r["n"] for _, r in batch.records] == [5, 6, 7]


def test_rewrite_in_place_with_longer_content_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"n": 1}))
    tail = JsonlTail(path)
    tail.read()
    with open(path, "r+b") as f:  # same inode, larger, different head
        f.write(line({"m": 2}) + line({"m": 3}))
    batch = tail.read()
    assert batch.reset
    assert [r["m"] for _, r in batch.records] == [2, 3]


def test_removed_file_resets_and_missing_file_is_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    tail = JsonlTail(path)
    batch = tail.read()
    assert (batch.reset, batch.file_error, batch.records) == (False, None, [])
    path.write_bytes(line({"n": 1}))
    assert len(tail.read().records) == 1
    path.unlink()
    assert tail.read().reset


def test_directory_and_fifo_report_a_file_error_and_never_block(tmp_path: Path) -> None:
    directory = tmp_path / "d.jsonl"
    directory.mkdir()
    assert JsonlTail(directory).read().file_error == "is a directory, expected a JSONL file"
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    assert JsonlTail(fifo).read().file_error == "is not a regular file, expected a JSONL file"


def test_append_reads_only_the_appended_bytes_whatever_the_file_size(tmp_path: Path) -> None:
    """The cost of one appended line does not depend on the file's size."""
    path = tmp_path / "big.jsonl"
    record = line({"task_id": "t", "gate": "lint", "status": "pass", "pad": "x" * 200})
    with open(path, "wb") as f:
        f.write(record * 200_000)  # ~50 MB
    tail = JsonlTail(path)
    while tail.read(8 * 1024 * 1024).more:
        pass
    before = tail.bytes_read
    with open(path, "ab") as f:
        f.write(line({"n": 1}))
    batch = tail.read()
    assert [r for _, r in batch.records] == [{"n": 1}]
    assert tail.bytes_read - before == len(line({"n": 1}))


def test_capped_reads_resume_where_they_stopped(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"".join(line({"n": i}) for i in range(1000)))
    tail = JsonlTail(path)
    seen: list[int] = []
    while True:
        batch = tail.read(777)
        seen += [r["n"] for _, r in batch.records]
        if not batch.more:
            break
    assert seen == list(range(1000))


LINES = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=3)
        .map(lambda d: json.dumps(d).encode()),
        st.binary(max_size=30).filter(lambda b: b"\n" not in b),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(lines=LINES, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
       trailing=st.booleans())
def test_any_split_into_appends_reads_like_the_whole(tmp_path_factory, lines, cuts,
                                                     trailing) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    base = tmp_path_factory.mktemp("split")
    whole = base / "whole.jsonl"
    whole.write_bytes(data)
    expected = JsonlTail(whole, "f").read()

    pieces = base / "pieces.jsonl"
    pieces.write_bytes(b"")
    tail = JsonlTail(pieces, "f")
    records, problems = [], []
    points = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    start = 0
    for point in points:
        with open(pieces, "ab") as f:
            f.write(data[start:point])
        start = point
        batch = tail.read()
        assert not batch.reset
        records += batch.records
        problems += batch.problems
    assert records == expected.records
    assert problems == expected.problems


def test_review_findings_on_odd_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + line({"n": 1}) + b'{"n": ' + b"9" * 5000 + b"}\n"
                     + line({"n": 3}))
    tail = JsonlTail(path, "x")
    batch = tail.read()
    assert [r["n"] for _, r in batch.records] == [1, 3]  # BOM skipped; huge int reported
    assert [(p.line, p.reason.startswith("invalid JSON")) for p in batch.problems] == [(2, True)]

    grown = tmp_path / "g.jsonl"  # same inode, same head, rewritten in place and longer
    first = line({"id": "t1", "s": "a" * 60})
    grown.write_bytes(first + line({"id": "t2", "s": "open"}))
    tail = JsonlTail(grown)
    tail.read()
    with open(grown, "r+b") as handle:
        handle.seek(0)
        handle.write(first + line({"id": "t2", "s": "done"}) + line({"id": "t3", "s": "new"}))
    batch = tail.read()
    assert batch.reset and [r["s"] for _, r in batch.records][-2:] == ["done", "new"]

    became_dir = tmp_path / "d.jsonl"
    became_dir.write_bytes(line({"n": 1}))
    tail = JsonlTail(became_dir)
    tail.read()
    became_dir.unlink()
    became_dir.mkdir()
    batch = tail.read()
    assert batch.reset and batch.file_error == "is a directory, expected a JSONL file"


def _stdlib_reading(data: bytes, limit: int) -> tuple[list, list]:
    """The oracle: every line through the standard library alone, as the reader did
    before it parsed with msgspec."""
    records, problems = [], []
    for number, raw in enumerate(data.split(b"\n")[:-1], 1):
        if len(raw) > limit:
            problems.append((number, f"line is {len(raw)} bytes, over the {limit}-byte "
                                     "limit; skipped"))
            continue
        if not raw.strip():
            continue
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            problems.append((number, None))  # the reason's wording: tested elsewhere
            continue
        if isinstance(value, dict):
            records.append((number, value))
        else:
            problems.append((number, f"expected a JSON object, got {type(value).__name__}"))
    return records, problems


ODD_LINES = st.lists(st.one_of(
    st.dictionaries(st.text(max_size=4), st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=6) | st.none() | st.booleans(), max_size=3)
    .map(lambda d: json.dumps(d).encode()),
    st.sampled_from([b"", b"   ", b"\r", b'{"a":1} {"a":2}', b'{"a":1}{"b":2}', b"[1]",
                     b'"s"', b"null", b'{"a": NaN}', b'{"a": 1e400}', b'{"n": ' + b"9" * 5000
                     + b"}", b'{"a": "\\ud800"}', b'{"a":"\xed\xa0\x80"}', b"\xef\xbb\xbf{}",
                     b'{"a": [' * 3000 + b"]" * 3000 + b"}", b'{"a": 1,}', b'{"a":"x\x01"}',
                     b'{"k": 1, "k": 2}', b"  {}  ", b'{"a": 1}\x00']),
), max_size=30)


@settings(max_examples=300, deadline=None)
@given(lines=ODD_LINES, step=st.integers(min_value=1, max_value=400),
       limit=st.sampled_from([64, 4 * 1024 * 1024]))
def test_reads_every_line_as_the_standard_library_does(tmp_path_factory, lines, step,
                                                       limit) -> None:
    """Parsed with msgspec, a block at a time where it can: the same records, and a
    problem on the same lines, as json line by line — however the reads are cut."""
    data = b"".join(raw + b"\n" for raw in lines)
    path = tmp_path_factory.mktemp("odd") / "x.jsonl"
    path.write_bytes(data)
    tail = JsonlTail(path, "x", max_line_bytes=limit)
    records, problems = [], []
    while True:
        batch = tail.read(step)
        records += batch.records
        problems += batch.problems
        if not batch.more:
            break
    want_records, want_problems = _stdlib_reading(data, limit)
    assert records == want_records
    assert [p.line for p in problems] == [n for n, _ in want_problems]
    for problem, (_, reason) in zip(problems, want_problems, strict=True):
        assert reason is None or problem.reason == reason


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.tuples(ODD_LINES.map(lambda ls: b"".join(raw + b"\n" for raw in ls)),
                                 st.integers(min_value=0, max_value=2),
                                 st.booleans()), min_size=1, max_size=5),
       step=st.sampled_from([5000, 1 << 20, None]),
       limit=st.sampled_from([64, 10_000, 4 * 1024 * 1024]))
def test_a_sparse_file_reads_as_its_bytes_do(tmp_path_factory, pieces, step, limit) -> None:
    """Holes are skipped by extent, never read: the same records and problems (same
    lines, same words) as the same bytes written out, however the reads are cut."""
    folder = tmp_path_factory.mktemp("sparse")
    sparse, dense = folder / "sparse.jsonl", folder / "dense.jsonl"
    data = bytearray()
    with open(sparse, "wb") as handle:
        for lines, blocks, torn in pieces:
            chunk = lines[:-1] if torn and lines else lines  # a hole inside a line
            handle.seek(len(data))
            handle.write(chunk)
            data += chunk
            hole = blocks * 65536 + (4095 if torn else 0)
            handle.truncate(len(data) + hole)
            data += bytes(hole)
    dense.write_bytes(bytes(data))

    def reading(path):
        tail = JsonlTail(path, "x", max_line_bytes=limit)
        records, problems = [], []
        while True:
            batch = tail.read(step)
            records += batch.records
            problems += [(p.line, p.reason) for p in batch.problems]
            if not batch.more:
                return records, problems, tail.offset, tail.line_no

    assert reading(sparse) == reading(dense)


def test_a_hole_at_the_end_then_appended_lines(tmp_path: Path) -> None:
    """A file that ends in a hole (its line reported once, at the end of the file), then
    has lines appended behind it: they are read, none of their bytes taken for the hole."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(line({"n": 1}))
    with open(path, "ab") as handle:
        handle.truncate(1 << 30)
    tail = JsonlTail(path, "x", max_line_bytes=1000)
    batch = tail.read()
    assert [r["n"] for _, r in batch.records] == [1] and tail.bytes_read < 1 << 20
    assert [(p.line, p.reason) for p in batch.problems] == [
        (2, f"line is over the 1000-byte limit (at least {(1 << 30) - 9} bytes); skipped")]
    for n in (2, 3):
        with open(path, "ab") as handle:
            handle.write(b"\n" + line({"n": n}) if n == 2 else line({"n": n}))
        batch = tail.read()
        assert [r["n"] for _, r in batch.records] == [n] and not batch.problems
    assert tail.line_no == 4
