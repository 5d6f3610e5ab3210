"""The output format of the claude, codex and gemini CLIs (this module owns it): what a
CLI reported about its run, read from the JSON lines it printed (its stream-JSON /
`--json` mode) into the attempt's log — tokens, its own cost when it says one, the
final assistant message, its own error line — and a readable transcript (the Log tab).

The log has the CLI's stdout and stderr merged, so every line that is not a JSON object
is skipped (a warning, a stack trace, a progress bar). The shapes are the CLIs' own:

- claude (`-p --output-format stream-json --verbose`): `{"type": "assistant",
  "message": {"content": [{"type": "text"|"tool_use", …}]}}`, `{"type": "user", …
  "tool_result"}`, and one `{"type": "result", "result": TEXT, "is_error": bool,
  "total_cost_usd": $, "usage": {"input_tokens", "output_tokens",
  "cache_creation_input_tokens", "cache_read_input_tokens"}, "modelUsage": {MODEL:
  {"inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
  "costUSD"}}}` (modelUsage, when present, is what the cost covers); while it runs,
  each assistant event carries its API message's `id` and `usage` (repeated on every
  content block of one message: counted once per id, the result's totals win);
- codex (`exec --json`): `{"type": "item.completed", "item": {"type": "agent_message",
  "text"}}` (and command_execution / file_change / reasoning items), one
  `{"type": "turn.completed", "usage": {"input_tokens", "cached_input_tokens",
  "output_tokens"}}` per turn (cached ⊆ input), `{"type": "turn.failed"|"error", …}`;
- gemini (`-o stream-json`): `{"type": "message", "role": "assistant", "content",
  "delta": true}` pieces, `{"type": "tool_use", "tool_name", "parameters"}`,
  `{"type": "tool_result", "status", "output"}`, and `{"type": "result", "status",
  "stats": {"input_tokens", "output_tokens", "cached", …}}` or `{"type": "error",
  "message"}` (its tokens come with the result only).

While an agent runs, `LiveReader` reads the same lines as they come (engine/agents/
telemetry.py): tokens so far, turns, and the last thing it did, one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

#: how much of an attempt's log is read for its report (the log itself is capped)
MAX_REPORT_BYTES = 8 * 1024 * 1024
STRUCTURED = frozenset({"claude", "codex", "gemini"})


#: `last` (the current tool call or the last assistant message) is one line of at most
LAST_CHARS = 200
#: a running agent's line longer than this is skipped (and said once)
MAX_LIVE_LINE = 4 * 1024 * 1024
MAX_MESSAGES = 100_000  # claude message ids remembered while it runs
_RESULT = "\0result"


class AgentReport(msgspec.Struct):
    tokens_in: int = 0  # every input token, cached ones included
    tokens_out: int = 0
    tokens_cached: int = 0  # the part of tokens_in read from the provider's cache
    turns: int = 0  # model turns so far (claude: API messages; codex, gemini: turns)
    last: str = ""  # what it is doing: its current tool call or last message, one line
    cost_usd: float | None = None  # the CLI's own figure, preferred to the price table
    final_message: str = ""
    error: str = ""  # the CLI's own words when it says the run failed
    events: int = 0  # JSON lines understood
    lines: list[str] = msgspec.field(default_factory=list)  # the readable transcript


def _map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text(value: object, limit: int = 2000) -> str:
    return value[:limit] if isinstance(value, str) else ""


def json_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects among `lines` (anything else — merged stderr — is skipped)."""
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def _claude(event: dict[str, Any], report: AgentReport, usage: dict[str, tuple[int, ...]]
            ) -> None:
    kind = event.get("type")
    if kind == "assistant":
        message = _map(event.get("message"))
        _claude_usage(message, report, usage)
        for block in _list(message.get("content")):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and _text(block.get("text")).strip():
                report.lines.append(f"assistant: {_text(block.get('text'))}")
                report.last = _one_line(f"says: {_text(block.get('text'))}")
            elif block.get("type") == "tool_use":
                report.lines.append(f"tool: {_text(block.get('name'), 80)} "
                                    f"{_brief(block.get('input'))}")
                report.last = _one_line(report.lines[-1])
    elif kind == "user":
        for block in _list(_map(event.get("message")).get("content")):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                state = "error" if block.get("is_error") else "ok"
                report.lines.append(f"result ({state}): {_brief(block.get('content'))}")
    elif kind == "result":
        # modelUsage counts every model the run used (its side calls on a small model
        # too) and is what total_cost_usd is; usage alone is the main loop's
        per_model = [_map(u) for u in _map(event.get("modelUsage")).values()]
        if per_model:
            report.tokens_in = sum(_int(u.get("inputTokens")) + _int(u.get(
                "cacheReadInputTokens")) + _int(u.get("cacheCreationInputTokens"))
                for u in per_model)
            report.tokens_out = sum(_int(u.get("outputTokens")) for u in per_model)
            report.tokens_cached = sum(_int(u.get("cacheReadInputTokens")) for u in per_model)
        else:
            said = _map(event.get("usage"))
            report.tokens_in = (_int(said.get("input_tokens"))
                                + _int(said.get("cache_creation_input_tokens"))
                                + _int(said.get("cache_read_input_tokens")))
            report.tokens_out = _int(said.get("output_tokens"))
            report.tokens_cached = _int(said.get("cache_read_input_tokens"))
        report.turns = _int(event.get("num_turns")) or report.turns
        usage.clear()  # the result's totals stand
        usage[_RESULT] = ()
        cost = event.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            report.cost_usd = float(cost)
        text = _text(event.get("result"), 20_000)
        if event.get("is_error") or str(event.get("subtype", "success")) != "success":
            report.error = text or str(event.get("subtype"))
        elif text:
            report.final_message = text
        report.lines.append(f"done: {event.get('subtype', 'result')}")


def _claude_usage(message: dict[str, Any], report: AgentReport,
                  usage: dict[str, tuple[int, ...]]) -> None:
    """Tokens so far from a running claude's assistant events: per API message id the
    largest figures seen (its blocks repeat them, the last one completes them)."""
    said = _map(message.get("usage"))
    key = message.get("id")
    if not said or not isinstance(key, str) or _RESULT in usage:
        return
    if key not in usage:
        if len(usage) >= MAX_MESSAGES:
            return
        report.turns += 1
    cached = _int(said.get("cache_read_input_tokens"))
    old = usage.get(key, (0, 0, 0))
    new = tuple(max(a, b) for a, b in zip(old, (
        _int(said.get("input_tokens")) + _int(said.get("cache_creation_input_tokens"))
        + cached, _int(said.get("output_tokens")), cached), strict=True))
    usage[key] = new
    report.tokens_in += new[0] - old[0]
    report.tokens_out += new[1] - old[1]
    report.tokens_cached += new[2] - old[2]


def _codex(event: dict[str, Any], report: AgentReport) -> None:
    kind = event.get("type")
    item = _map(event.get("item"))
    if kind == "item.completed":
        what = item.get("type")
        if what == "agent_message":
            report.final_message = _text(item.get("text"), 20_000)
            report.lines.append(f"assistant: {_text(item.get('text'))}")
        elif what == "command_execution":
            report.lines.append(f"tool: shell {_text(item.get('command'), 200)} "
                                f"(exit {item.get('exit_code')})")
        elif what == "file_change":
            changes = item.get("changes") or []
            paths = [str(c.get("path")) for c in changes if isinstance(c, dict)]
            report.lines.append(f"tool: edit {', '.join(paths)[:300]}")
        elif what == "error":
            report.lines.append(f"error: {_text(item.get('message'))}")
        else:
            return
        report.last = _one_line(report.lines[-1].replace("assistant:", "says:", 1))
    elif kind == "item.started" and item.get("type") == "command_execution":
        report.last = _one_line(f"tool: shell {_text(item.get('command'), 200)}")
    elif kind == "turn.started":
        report.turns += 1
    elif kind == "turn.completed":
        usage = _map(event.get("usage"))
        report.tokens_in += _int(usage.get("input_tokens"))
        report.tokens_out += _int(usage.get("output_tokens"))
        report.tokens_cached += _int(usage.get("cached_input_tokens"))
    elif kind in ("turn.failed", "error"):
        error = _map(event.get("error")) or event
        report.error = _text(error.get("message")) or str(kind)
        report.lines.append(f"error: {report.error}")


def _gemini(event: dict[str, Any], report: AgentReport, pieces: list[str]) -> None:
    kind = event.get("type")
    if kind == "message" and event.get("role") == "assistant":
        if not event.get("delta"):
            pieces.clear()
        if not pieces:
            report.turns += 1
        pieces.append(_text(event.get("content"), 20_000))
        if len(pieces) > 64:  # a long message keeps its last 20 000 characters
            pieces[:] = ["".join(pieces)[-20_000:]]
        report.last = _one_line("says: " + "".join(p[-400:] for p in pieces[-8:])[-400:])
        return
    if pieces:  # an assistant message ended
        text = "".join(pieces)
        report.final_message = text
        report.lines.append(f"assistant: {text[:2000]}")
        pieces.clear()
    if kind == "tool_use":
        report.lines.append(f"tool: {_text(event.get('tool_name'), 80)} "
                            f"{_brief(event.get('parameters'))}")
        report.last = _one_line(report.lines[-1])
    elif kind == "tool_result":
        report.lines.append(f"result ({event.get('status')}): {_brief(event.get('output'))}")
    elif kind == "result":
        stats = _map(event.get("stats"))
        report.tokens_in = _int(stats.get("input_tokens"))
        report.tokens_out = _int(stats.get("output_tokens"))
        report.tokens_cached = _int(stats.get("cached"))
        if event.get("status") not in (None, "success"):
            error = _map(event.get("error"))
            report.error = _text(error.get("message")) or str(event.get("status"))
        report.lines.append(f"done: {event.get('status', 'result')}")
    elif kind == "error":
        report.error = _text(event.get("message")) or "error"
        report.lines.append(f"error: {report.error}")


def _brief(value: object, limit: int = 160) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    """One line of at most LAST_CHARS (the sanitiser still runs where it is shown)."""
    text = " ".join(text.split())
    return text if len(text) <= LAST_CHARS else text[: LAST_CHARS - 1] + "…"


def _feed(adapter: str, event: dict[str, Any], report: AgentReport,
          pieces: list[str], usage: dict[str, tuple[int, ...]] | None = None) -> None:
    report.events += 1
    if adapter == "claude":
        _claude(event, report, {} if usage is None else usage)
    elif adapter == "codex":
        _codex(event, report)
    elif adapter == "gemini":
        _gemini(event, report, pieces)


def _flush(report: AgentReport, pieces: list[str]) -> None:
    if pieces:
        report.final_message = "".join(pieces)
        report.lines.append(f"assistant: {report.final_message[:2000]}")
        pieces.clear()


def parse_report(adapter: str, lines: Iterable[str]) -> AgentReport:
    """The report of one run of `adapter` from its output lines."""
    report = AgentReport()
    pieces: list[str] = []
    usage: dict[str, tuple[int, ...]] = {}
    for event in json_lines(lines):
        _feed(adapter, event, report, pieces, usage)
    _flush(report, pieces)
    return report


def readable(adapter: str, text: str) -> str | None:
    """A log as a transcript — messages, tool calls, results, the CLI's other lines as
    they came — or None when it holds none of the CLI's JSON (show it raw)."""
    report = AgentReport()
    pieces: list[str] = []
    out: list[str] = []
    shown = 0
    for line in text.splitlines():
        event = next(json_lines([line]), None)
        if event is None:
            out.append(line)
            continue
        _feed(adapter, event, report, pieces)
        out.extend(report.lines[shown:])
        shown = len(report.lines)
    _flush(report, pieces)
    out.extend(report.lines[shown:])
    return "\n".join(out) if report.events else None


def read_report(adapter: str, log_path: Path) -> AgentReport:
    """The report from an attempt's log (its last MAX_REPORT_BYTES; unreadable: empty)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - MAX_REPORT_BYTES))
            data = handle.read(MAX_REPORT_BYTES)
    except OSError:
        return AgentReport()
    return parse_report(adapter, data.decode("utf-8", errors="replace").splitlines())


_decode = msgspec.json.Decoder().decode  # (what json.loads does, several times faster)


class LiveReader:
    """A running agent's output, read as it is written: `feed` its bytes in any chunks.

    The structured CLIs' lines go through their own reader above; a script or generic
    agent's JSON lines are read as claude's stream-JSON (the shape a script may print),
    its other lines are its narrative (`last`). A line that looks like JSON and is not
    is counted and said once in `problem`; it never stops the lines after it."""

    def __init__(self, adapter: str) -> None:
        self.structured = adapter in STRUCTURED
        self.format = adapter if self.structured else "claude"
        self.report = AgentReport()
        self.problem = ""  # the first line that could not be read, and why
        self.bad_lines = 0
        self._pieces: list[str] = []
        self._usage: dict[str, tuple[int, ...]] = {}
        self._partial = bytearray()
        self._skipping = False  # inside an over-long line

    def feed(self, chunk: bytes) -> list[str]:
        """Read what the chunk completes; returns its lines that were not JSON."""
        plain: list[str] = []
        lines = chunk.split(b"\n")
        for index, raw in enumerate(lines):
            last = index == len(lines) - 1
            if self._skipping:
                self._skipping = last
                continue
            if len(self._partial) + len(raw) > MAX_LIVE_LINE:
                self._bad(f"a line over {MAX_LIVE_LINE} bytes, skipped")
                self._partial.clear()
                self._skipping = last
                continue
            self._partial += raw
            if last:
                break
            line = self._partial.decode("utf-8", errors="replace").strip()
            self._partial.clear()
            if line:
                self._line(line, plain)
        del self.report.lines[:]  # (the transcript is read from the log, not kept here)
        return plain

    def _line(self, line: str, plain: list[str]) -> None:
        if not line.startswith("{"):
            plain.append(line)
            if not self.structured:
                self.report.last = _one_line(line)
            return
        try:
            event = _decode(line)
        except (msgspec.DecodeError, ValueError, RecursionError):
            self._bad(f"not JSON: {_one_line(line)[:60]}")
            return
        # (a claude tool result says nothing live: its transcript is read from the log)
        if isinstance(event, dict) and not (self.format == "claude"
                                            and event.get("type") == "user"):
            _feed(self.format, event, self.report, self._pieces, self._usage)

    def _bad(self, why: str) -> None:
        self.bad_lines += 1
        if not self.problem:
            self.problem = why
