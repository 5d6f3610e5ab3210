"""Incremental JSONL reading: each call reads only the bytes appended since the last.

A `JsonlTail` remembers a byte offset, so one appended line costs the same on a
1 MB file as on a 1 GB one. It holds a trailing half line until its newline
arrives, notices truncation and replacement (size shrink, new inode, rewritten
head) and starts over, and reports every unusable line with its number and
reason without stopping at it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.model import Problem

MAX_LINE_BYTES = 4 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
_HEAD_BYTES = 64


@dataclass(slots=True)
class TailBatch:
    """What one read produced."""

    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: the file was truncated, replaced or removed: everything read from it before is void
    reset: bool = False
    #: why the file cannot be read right now (missing is not an error), else None
    file_error: str | None = None
    #: bytes still unread because the read was capped
    more: bool = False


def decode_line(raw: bytes, first: bool = False) -> dict[str, Any] | str:
    """One line's bytes → its JSON object, or the reason it is unusable."""
    if first and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # a UTF-8 byte-order mark some editors write
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
        self._ident: tuple[int, int] | None = None
        self._head = b""  # the first bytes, to notice a rewrite from the start
        self._probe = b""  # the bytes just before `offset`, to notice a rewrite in place

    def _restart(self) -> None:
        self.offset = 0
        self.line_no = 0
        self._pending.clear()
        self._skipping = 0
        self._ident = None
        self._head = b""
        self._probe = b""

    def read(self, max_bytes: int | None = None) -> TailBatch:
        batch = TailBatch()
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
        while budget > 0:
            chunk = os.pread(fd, min(CHUNK_BYTES, budget), self.offset)
            if not chunk:
                break
            self.offset += len(chunk)
            self.bytes_read += len(chunk)
            budget -= len(chunk)
            self._probe = (self._probe + chunk[-_HEAD_BYTES:])[-_HEAD_BYTES:]
            self._split(chunk, batch)
        batch.more = os.fstat(fd).st_size > self.offset

    def _split(self, chunk: bytes, batch: TailBatch) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._hold(chunk[start:])
                return
            self.line_no += 1
            if self._skipping:
                size = self._skipping + (end - start)
                self._skipping = 0
                batch.problems.append(Problem(
                    self.display, self.line_no,
                    f"line is {size} bytes, over the {self.max_line_bytes}-byte limit; skipped"))
            else:
                if self._pending:
                    self._pending += chunk[start:end]
                    raw = bytes(self._pending)
                    self._pending.clear()
                else:
                    raw = chunk[start:end]
                self._emit(raw, batch)
            start = end + 1

    def _hold(self, tail: bytes) -> None:
        if self._skipping:
            self._skipping += len(tail)
        elif len(self._pending) + len(tail) > self.max_line_bytes:
            self._skipping = len(self._pending) + len(tail)
            self._pending.clear()
        else:
            self._pending += tail

    def _emit(self, raw: bytes, batch: TailBatch) -> None:
        if len(raw) > self.max_line_bytes:
            batch.problems.append(Problem(
                self.display, self.line_no,
                f"line is {len(raw)} bytes, over the {self.max_line_bytes}-byte limit; skipped"))
            return
        if not raw.strip():
            return
        value = decode_line(raw, first=self.line_no == 1)
        if isinstance(value, str):
            batch.problems.append(Problem(self.display, self.line_no, value))
        else:
            batch.records.append((self.line_no, value))
