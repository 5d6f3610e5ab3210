"""The structured error digest (seed 002): the unique errors of a tool's output, with
`file:line` and the offending line, deduplicated by first line, capped at 10, and
saying how many were left out — what an agent (and an operator) needs, not 800 lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from console.sdd.confine import UnsafePath, within
from console.sdd.fileio import read_regular_file

MAX_ERRORS = 10
MAX_SOURCE_BYTES = 8 * 1024 * 1024  # a source file a digest quotes a line from

_RUFF = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<msg>[A-Z]+\d+ .*)$")
_MYPY = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+)(?::\d+)?: error: (?P<msg>.*)$")
_PYRIGHT = re.compile(r"^\s*(?P<file>/?[^\s:][^:]*):(?P<line>\d+):\d+ - error: (?P<msg>.*)$")
_COMPILER = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: "
                       r"(?P<msg>.*)$")
_ARROW = re.compile(r"^\s*--> (?P<file>[^:]+):(?P<line>\d+)(?::\d+)?")
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_PYTEST_LOC = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+): (?P<msg>\w*(?:Error|Exception)"
                         r"\w*.*)$")
_PYTEST_FRAME = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+): in \S+")


@dataclass(frozen=True, slots=True)
class DigestEntry:
    message: str  # the first line: what deduplication compares
    file: str | None = None
    line: int | None = None
    source: str = ""  # the offending line, when it can be read

    @property
    def location(self) -> str:
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file

    def render(self) -> str:
        head = f"{self.location}: {self.message}" if self.location else self.message
        return f"{head}\n    {self.source.strip()}" if self.source.strip() else head


@dataclass(frozen=True, slots=True)
class Digest:
    entries: tuple[DigestEntry, ...]
    left_out: int = 0

    def render(self) -> str:
        if not self.entries:
            return ""
        text = f"{len(self.entries) + self.left_out} unique error(s):\n"
        text += "\n".join(e.render() for e in self.entries)
        if self.left_out:
            text += f"\n… and {self.left_out} more left out"
        return text

    @property
    def first(self) -> str:
        return self.entries[0].render().splitlines()[0] if self.entries else ""


def _source_line(root: Path | None, file: str | None, line: int | None) -> str:
    """The line a tool's output names, from a regular file inside `root` only (the output
    is data: an absolute, `../` or linked path, a FIFO or a device shows nothing)."""
    if root is None or file is None or not line or line > 1_000_000:
        return ""
    try:
        path = Path(file)
        path = within(root, path.relative_to(root) if path.is_absolute() else path,
                      what="source file")
    except (UnsafePath, ValueError):
        return ""
    data, _problem = read_regular_file(path, file, MAX_SOURCE_BYTES)
    if data is None:
        return ""
    lines = data.split(b"\n", line)
    return lines[line - 1].decode("utf-8", "replace")[:200] if len(lines) >= line else ""


def build(entries: Iterable[DigestEntry], root: Path | None = None,
          cap: int = MAX_ERRORS) -> Digest:
    """Deduplicate by first line (location + message), fill in source lines, cap."""
    seen: set[str] = set()
    unique: list[DigestEntry] = []
    for entry in entries:
        key = f"{entry.location}: {entry.message}"
        if key in seen:
            continue
        seen.add(key)
        unique.append(entry)
    kept = [e if e.source else DigestEntry(e.message, e.file, e.line,
                                          _source_line(root, e.file, e.line))
            for e in unique[:cap]]
    return Digest(tuple(kept), max(0, len(unique) - cap))


def relative(file: str, root: Path | None) -> str:
    if root is not None and Path(file).is_absolute():
        try:
            return str(Path(file).resolve().relative_to(root.resolve()))
        except ValueError:
            return file
    return file


def by_pattern(output: str, pattern: re.Pattern[str], root: Path | None) -> list[DigestEntry]:
    entries = []
    for line in output.splitlines():
        match = pattern.match(line)
        if match:
            entries.append(DigestEntry(match["msg"].strip(), relative(match["file"], root),
                                       int(match["line"])))
    return entries


def ruff_digest(output: str, root: Path | None = None) -> Digest:
    return build(by_pattern(output, _RUFF, root), root)


def mypy_digest(output: str, root: Path | None = None) -> Digest:
    return build(by_pattern(output, _MYPY, root), root)


def pyright_digest(output: str, root: Path | None = None) -> Digest:
    return build(by_pattern(output, _PYRIGHT, root), root)


def generic_digest(output: str, root: Path | None = None) -> Digest:
    """Compiler-style blocks: `file:line: error: msg`, or `error[...]: msg` + `--> file:line`."""
    entries: list[DigestEntry] = []
    pending: str | None = None
    for line in output.splitlines():
        match = _COMPILER.match(line)
        if match:
            entries.append(DigestEntry(match["msg"].strip(), relative(match["file"], root),
                                       int(match["line"])))
            pending = None
            continue
        if line.startswith(("error:", "error[")):
            if pending is not None:
                entries.append(DigestEntry(pending))
            pending = line.strip()
            continue
        arrow = _ARROW.match(line)
        if arrow and pending is not None:
            entries.append(DigestEntry(pending, relative(arrow["file"], root),
                                       int(arrow["line"])))
            pending = None
    if pending is not None:
        entries.append(DigestEntry(pending))
    return build(entries, root)


def pytest_failure_entry(test_id: str, text: str, root: Path | None) -> DigestEntry:
    """One failing test: its id, the assertion, and the deepest frame inside the project."""
    assertion = ""
    location: tuple[str, int] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("E ") and not assertion:
            assertion = stripped[1:].strip()
        loc = _PYTEST_LOC.match(stripped)
        if loc:
            location = (relative(loc["file"], root), int(loc["line"]))
            if not assertion:
                assertion = loc["msg"]
        short = _PYTEST_FRAME.match(stripped)
        if short:  # --tb=short frames: the last one is where it failed
            location = (relative(short["file"], root), int(short["line"]))
        frame = _PY_FRAME.match(line)
        if frame and location is None:
            location = (relative(frame["file"], root), int(frame["line"]))
    message = f"{test_id} failed" + (f": {assertion}" if assertion else "")
    if location is None:
        return DigestEntry(message)
    return DigestEntry(message, location[0], location[1])
