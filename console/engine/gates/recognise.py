"""A tool's output, whatever command launched it (a project's own `test_command`,
`lint_command`, `make check`, `uv run pytest`, …), recognised by its shape: pytest's
summary and failure sections, ruff (concise or full), mypy, pyright, else compiler-style
errors. The digest names test ids and `file:line`; `one_line` keeps a details cell to
one line (the raw output stays in the gate log).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from console.engine.gates import digest as dg

_PYTEST_RESULT = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<id>\S+)(?: - (?P<msg>.*))?$")
_PYTEST_SECTION = re.compile(r"^_{3,} (?:ERROR (?:at \w+ of|collecting) )?(?P<name>.+?) _{3,}$")
_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)"
                            r"\b")
_PYTEST_SUMMARY = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+ in [\d.]+s")
_RUFF_HEAD = re.compile(r"^(?P<code>[A-Z]+\d+) (?:\[\*\] )?(?P<msg>\S.*)$")
_RUFF_ARROW = re.compile(r"^\s*--> (?P<file>[^:]+):(?P<line>\d+):\d+")


@dataclass(frozen=True, slots=True)
class Recognised:
    tool: str  # pytest | ruff | mypy | pyright | compiler | "" (nothing recognised)
    digest: dg.Digest
    counts: dict[str, int]

    @property
    def count(self) -> int:
        return len(self.digest.entries) + self.digest.left_out


def _sections(output: str) -> dict[str, str]:
    """pytest's failure sections by header name (`test_a`, `TestX.test_b`, a path)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        head = _PYTEST_SECTION.match(line)
        if head:
            current = sections.setdefault(head["name"], [])
        elif line.startswith(("=====", "-- Docs", "-----")) and current is not None:
            if "short test summary" in line or "warnings summary" in line:
                current = None
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def _section_for(test_id: str, sections: dict[str, str]) -> str:
    _file, _sep, rest = test_id.partition("::")
    dotted = rest.replace("::", ".")
    for name in (dotted, rest.rsplit("::", 1)[-1], test_id, _file):
        if name and name in sections:
            return sections[name]
    return ""


def pytest_output(output: str, root: Path | None) -> Recognised | None:
    """pytest's text output (the default `-rfE` summary names each failure)."""
    results = [m for m in map(_PYTEST_RESULT.match, output.splitlines()) if m]
    lines = output.splitlines()
    summary = next((line for line in reversed(lines) if _PYTEST_SUMMARY.match(line.strip())
                    or re.match(r"^=+ no tests ran", line)), None)
    if not results and summary is None:
        return None
    counts: dict[str, int] = {}
    for number, kind in _PYTEST_COUNTS.findall(summary or ""):
        counts["errors" if kind.startswith("error") else kind] = int(number)
    sections = _sections(output)
    entries = []
    for match in results:
        text = _section_for(match["id"], sections)
        entry = dg.pytest_failure_entry(match["id"], text, root)
        if match["msg"] and ": " not in entry.message:
            entry = dg.DigestEntry(f"{match['id']} failed: {match['msg']}", entry.file,
                                   entry.line)
        if match["kind"] == "ERROR":
            entry = dg.DigestEntry(entry.message.replace(" failed", " error", 1), entry.file,
                                   entry.line)
        entries.append(entry)
    return Recognised("pytest", dg.build(entries, root), counts)


def _ruff_full(output: str, root: Path | None) -> list[dg.DigestEntry]:
    entries: list[dg.DigestEntry] = []
    pending: str | None = None
    for line in output.splitlines():
        head = _RUFF_HEAD.match(line)
        if head:
            pending = f"{head['code']} {head['msg']}"
            continue
        arrow = _RUFF_ARROW.match(line)
        if arrow and pending is not None:
            entries.append(dg.DigestEntry(pending, dg.relative(arrow["file"], root),
                                          int(arrow["line"])))
            pending = None
    return entries


def recognise(output: str, root: Path | None = None) -> Recognised:
    """The first tool whose output shape matches, with its digest; else nothing."""
    found = pytest_output(output, root)
    if found is not None and (found.digest.entries or found.counts):
        return found
    for tool, parse in (("ruff", dg.ruff_digest), ("mypy", dg.mypy_digest),
                        ("pyright", dg.pyright_digest)):
        digest = parse(output, root)
        if digest.entries:
            return Recognised(tool, digest, {})
    full = _ruff_full(output, root)
    if full:
        return Recognised("ruff", dg.build(full, root), {})
    generic = dg.generic_digest(output, root)
    return Recognised("compiler" if generic.entries else "", generic, {})


def one_line(text: str, limit: int = 160) -> str:
    """The last non-empty line of a tool's output, cut to `limit`: fit for a details cell."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


def tail(text: str, lines: int = 20) -> str:
    """The last lines of raw output, for a digest when nothing in it was recognised."""
    kept = [line for line in text.rstrip().splitlines() if line.strip()][-lines:]
    return ("last lines of the output:\n" + "\n".join(kept)) if kept else ""
