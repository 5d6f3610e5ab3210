"""Incremental JSONL reading: each call reads only the bytes appended since the last.

A `JsonlTail` remembers a byte offset, so one appended line costs the same on a
1 MB file as on a 1 GB one. It holds a trailing half line until its newline
arrives, notices truncation and replacement (size shrink, new inode, rewritten
head) and starts over, and reports every unusable line with its number and
reason without stopping at it.

The bytes are read in chunks and handed on as `Block`s of whole lines (numbered):
`read()` decodes them into records, `read(blocks=True)` leaves that to the caller (the
State decodes a hot kind's block at once, sdd/gate_lines.py, and any block it cannot
take whole through `decode_block`, line by line, with the same reasons).

Lines are parsed with msgspec (one block at a time where it can: `decode_lines`), and
any line it refuses again with the standard library, whose message is the reason shown:
msgspec accepts a subset of what `json` accepts, with the same values (it refuses NaN,
1e400, lone surrogates and integers over Python's 4,300-digit limit, as json does the
last); tests/test_tail.py holds the two to the same records and problems.

A sparse file is read by its data extents (`SEEK_DATA`/`SEEK_HOLE`): a hole reads as
NUL bytes, so it is taken as that many NUL bytes of the line it falls in without
reading them (a 100 GB hole costs two system calls, not minutes). Such a line, like any
line over the limit, is one problem; one still without its newline at the end of the
file is reported then (once), not only when (if ever) its newline comes.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import msgspec

from console.model import Problem

MAX_LINE_BYTES = 4 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
_HEAD_BYTES = 64


class Block(msgspec.Struct, frozen=True):
    """Whole lines as read (`data` ends with a newline; its first line is number
    `first`), or a line skipped for its length (`problem`)."""

    first: int
    data: bytes = b""
    problem: Problem | None = None
    lines: int = 0  # how many (newlines in data)


class TailBatch(msgspec.Struct):
    """What one read produced."""

    records: list[tuple[int, dict[str, Any]]] = msgspec.field(default_factory=list)
    problems: list[Problem] = msgspec.field(default_factory=list)
    #: read(blocks=True): the lines, undecoded, in file order (records stay empty)
    blocks: list[Block] = msgspec.field(default_factory=list)
    max_line_bytes: int = MAX_LINE_BYTES
    #: the file was truncated, replaced or removed: everything read from it before is void
    reset: bool = False
    #: why the file cannot be read right now (missing is not an error), else None
    file_error: str | None = None
    #: bytes still unread because the read was capped
    more: bool = False


BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark some editors write
_DECODER = msgspec.json.Decoder()
_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")
_BLANK_FIRST = re.compile(rb"[ \t\r]*\n")


def whole_lines(data: bytes, values: list[Any], lines: int | None = None) -> bool:
    """`values` (msgspec's decode_lines of `data`) are exactly one per line: as many as
    newlines (`lines`, when the caller counted them) and no blank line (which it skips;
    two objects on one line it splits)."""
    return (len(values) == (data.count(b"\n") if lines is None else lines)
            and _BLANK_FIRST.match(data) is None and _BLANK_LINE.search(data) is None)


def decode_line(raw: bytes, first: bool = False) -> dict[str, Any] | str:
    """One line's bytes → its JSON object, or the reason it is unusable."""
    if first and raw.startswith(BOM):
        raw = raw[3:]  # a UTF-8 byte-order mark some editors write
    try:
        value = _DECODER.decode(raw)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        pass  # the standard library says why (or takes what msgspec would not)
    else:
        if isinstance(value, dict):
            return value
        return f"expected a JSON object, got {type(value).__name__}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start + 1}"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return "invalid JSON: nested too deeply"
    except ValueError as exc:  # e.g. an integer with too many digits
        return f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return f"expected a JSON object, got {type(value).__name__}"
    return value


def decode_block(block: Block, display: str, max_line_bytes: int
                 ) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """A block's lines → (line number, object) and a Problem for each unusable line."""
    if block.problem is not None:
        return [], [block.problem]
    data = block.data
    if len(data) <= max_line_bytes and not (block.first == 1 and data.startswith(BOM)):
        try:  # the whole block at once when every line is one object
            values = _DECODER.decode_lines(data)
        except (msgspec.MsgspecError, ValueError, RecursionError):
            values = None
        if values is not None and whole_lines(data, values) and all(
                type(v) is dict for v in values):
            return list(enumerate(values, block.first)), []
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[Problem] = []
    for number, raw in enumerate(data.split(b"\n")[:-1], block.first):
        if len(raw) > max_line_bytes:
            problems.append(_too_long(display, number, len(raw), max_line_bytes))
            continue
        if not raw.strip():
            continue
        value = decode_line(raw, first=number == 1)
        if isinstance(value, str):
            problems.append(Problem(display, number, value))
        else:
            records.append((number, value))
    return records, problems


def _too_long(display: str, line: int, size: int, limit: int) -> Problem:
    return Problem(display, line, f"line is {size} bytes, over the {limit}-byte limit; skipped")


class Position(msgspec.Struct, frozen=True):
    """Where a tail stands in the file it read (a checkpoint keeps it)."""

    ident: tuple[int, int]
    offset: int
    line_no: int
    head: bytes
    pending: bytes
    skipping: int
    probe: bytes = b""  # the last bytes read, just before `offset`


class JsonlTail:
    """Follows one append-only JSONL file from a byte offset."""

    def __init__(self, path: Path, display: str | None = None,
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = path
        self.display = display or str(path)
        self.max_line_bytes = max_line_bytes
        self.offset = 0
        self.line_no = 0
        self.bytes_read = 0  # cumulative, so tests can prove reads are incremental
        self._pending = bytearray()
        self._skipping = 0  # bytes of an over-long line being skipped
        self._skip_reported = False  # that line's problem was given before its newline
        self._ident: tuple[int, int] | None = None
        self._head = b""  # the first bytes, to notice a rewrite from the start
        self._probe = b""  # the bytes just before `offset`, to notice a rewrite in place

    def position(self) -> Position | None:
        """Where this tail stands; None before it has read its file."""
        if self._ident is None:
            return None
        return Position(self._ident, self.offset, self.line_no, self._head,
                        bytes(self._pending), self._skipping, self._probe)

    def resume(self, position: Position) -> None:
        """Stand where a checkpoint says this file was read to (the caller checked that
        the file is still the one read)."""
        self._restart()
        self._ident = position.ident
        self.offset, self.line_no = position.offset, position.line_no
        self._head = position.head
        self._pending = bytearray(position.pending)
        self._skipping = position.skipping
        # a checkpoint is taken after a read to the end, which reported a line being skipped
        self._skip_reported = position.skipping > 0
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return  # gone since: the next read starts over
        try:
            start = max(0, self.offset - _HEAD_BYTES)
            self._probe = os.pread(fd, self.offset - start, start)
        except OSError:
            self._probe = b""
        finally:
            os.close(fd)

    def _restart(self) -> None:
        self.offset = 0
        self.line_no = 0
        self._pending.clear()
        self._skipping = 0
        self._skip_reported = False
        self._ident = None
        self._head = b""
        self._probe = b""

    def read(self, max_bytes: int | None = None, *, blocks: bool = False) -> TailBatch:
        """What was appended since the last read (at most `max_bytes` of it): decoded
        records, or with `blocks` the undecoded blocks of whole lines."""
        batch = TailBatch(max_line_bytes=self.max_line_bytes)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            if self._ident is not None:
                self._restart()
                batch.reset = True
            return batch
        except NotADirectoryError:  # a parent directory became a file: as good as gone
            if self._ident is not None:
                self._restart()
                batch.reset = True
            return batch
        except OSError as exc:
            batch.file_error = f"cannot open: {exc.strerror or exc}"
            return batch
        try:
            self._read_fd(fd, batch, max_bytes)
        except OSError as exc:
            batch.file_error = f"cannot read: {exc.strerror or exc}"
        finally:
            os.close(fd)
        if not blocks:
            for block in batch.blocks:
                records, problems = decode_block(block, self.display, self.max_line_bytes)
                batch.records += records
                batch.problems += problems
            batch.blocks = []
        return batch

    def _read_fd(self, fd: int, batch: TailBatch, max_bytes: int | None) -> None:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            batch.file_error = f"is {kind}, expected a JSONL file"
            if self._ident is not None:  # what was read from the old file is void
                self._restart()
                batch.reset = True
            return
        ident = (info.st_dev, info.st_ino)
        if self._ident is not None and (
            ident != self._ident
            or info.st_size < self.offset
            or os.pread(fd, len(self._head), 0) != self._head
            or os.pread(fd, len(self._probe), self.offset - len(self._probe)) != self._probe
        ):
            self._restart()
            batch.reset = True
        self._ident = ident
        if len(self._head) < _HEAD_BYTES:
            self._head = os.pread(fd, _HEAD_BYTES, 0)
        budget = max_bytes if max_bytes is not None else info.st_size
        sparse = info.st_blocks * 512 < info.st_size  # holes (or compression): by extents
        while budget > 0:
            want = min(CHUNK_BYTES, budget)
            if sparse:  # a hole costs no budget: nothing is read
                start, end = _data_extent(fd, self.offset)
                if start > self.offset:
                    self._take_zeros(start - self.offset)
                    self.offset = start
                want = max(1, min(want, end - self.offset))
            chunk = os.pread(fd, want, self.offset)
            if not chunk:
                break
            self.offset += len(chunk)
            self.bytes_read += len(chunk)
            budget -= len(chunk)
            self._probe = (self._probe + chunk[-_HEAD_BYTES:])[-_HEAD_BYTES:]
            self._take(chunk, batch)
        batch.more = os.fstat(fd).st_size > self.offset
        if self._skipping and not self._skip_reported and not batch.more:
            self._skip_reported = True  # at the end of the file, still no newline: say so now
            line = self.line_no + 1
            batch.blocks.append(Block(line, problem=Problem(self.display, line, (
                f"line is over the {self.max_line_bytes}-byte limit (at least {self._skipping} "
                "bytes); skipped"))))

    def _take(self, chunk: bytes, batch: TailBatch) -> None:
        """A chunk's whole lines (with the half line held before them) as one block; the
        rest held until its newline comes."""
        start = 0
        if self._skipping:  # the end of an over-long line, if it is in this chunk
            end = chunk.find(b"\n")
            if end < 0:
                self._skipping += len(chunk)
                return
            self.line_no += 1
            if not self._skip_reported:
                batch.blocks.append(Block(self.line_no, problem=_too_long(
                    self.display, self.line_no, self._skipping + end, self.max_line_bytes)))
            self._skipping = 0
            self._skip_reported = False
            start = end + 1
        last = chunk.rfind(b"\n", start)
        if last < 0:
            self._hold(chunk[start:])
            return
        data = chunk[start:last + 1]
        if self._pending:
            data = bytes(self._pending) + data
            self._pending.clear()
        lines = data.count(b"\n")
        batch.blocks.append(Block(self.line_no + 1, data, lines=lines))
        self.line_no += lines
        self._hold(chunk[last + 1:])

    def _take_zeros(self, size: int) -> None:
        """A hole of `size` bytes: NUL bytes (no newline) of the line being read."""
        self._probe = (self._probe + bytes(min(size, _HEAD_BYTES)))[-_HEAD_BYTES:]
        if self._skipping or len(self._pending) + size > self.max_line_bytes:
            self._skipping += len(self._pending) + size
            self._pending.clear()
        else:
            self._pending += bytes(size)

    def _hold(self, tail: bytes) -> None:
        if not tail:
            return
        if self._skipping:
            self._skipping += len(tail)
        elif len(self._pending) + len(tail) > self.max_line_bytes:
            self._skipping = len(self._pending) + len(tail)
            self._pending.clear()
        else:
            self._pending += tail


def _data_extent(fd: int, offset: int) -> tuple[int, int]:
    """Where the data at or after `offset` starts and ends (the next hole, or the end of
    the file); the end of the file twice when only a hole is left. A file system that
    cannot say has one extent."""
    try:
        start = _next_data(fd, offset)
        if start is None:  # only a hole up to the end, or the end: as long as it is now
            size = os.fstat(fd).st_size
            # asked again after the size: bytes appended meanwhile are data, never a hole
            start = _next_data(fd, offset)
            if start is None:
                return max(offset, size), max(offset, size)
        return start, os.lseek(fd, start, os.SEEK_HOLE)
    except OSError:
        return offset, offset + CHUNK_BYTES


def _next_data(fd: int, offset: int) -> int | None:
    try:
        return os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no data from `offset` to the end of the file
            return None
        raise
