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
  "costUSD"}}}` (modelUsage, when present, is what the cost covers);
- codex (`exec --json`): `{"type": "item.completed", "item": {"type": "agent_message",
  "text"}}` (and command_execution / file_change / reasoning items), one
  `{"type": "turn.completed", "usage": {"input_tokens", "cached_input_tokens",
  "output_tokens"}}` per turn, `{"type": "turn.failed"|"error", …}`;
- gemini (`-o stream-json`): `{"type": "message", "role": "assistant", "content",
  "delta": true}` pieces, `{"type": "tool_use", "tool_name", "parameters"}`,
  `{"type": "tool_result", "status", "output"}`, and `{"type": "result", "status",
  "stats": {"input_tokens", "output_tokens", …}}` or `{"type": "error", "message"}`.
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


class AgentReport(msgspec.Struct):
    tokens_in: int = 0
    tokens_out: int = 0
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


def _claude(event: dict[str, Any], report: AgentReport) -> None:
    kind = event.get("type")
    if kind == "assistant":
        for block in _list(_map(event.get("message")).get("content")):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and _text(block.get("text")).strip():
                report.lines.append(f"assistant: {_text(block.get('text'))}")
            elif block.get("type") == "tool_use":
                report.lines.append(f"tool: {_text(block.get('name'), 80)} "
                                    f"{_brief(block.get('input'))}")
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
        else:
            usage = _map(event.get("usage"))
            report.tokens_in = (_int(usage.get("input_tokens"))
                                + _int(usage.get("cache_creation_input_tokens"))
                                + _int(usage.get("cache_read_input_tokens")))
            report.tokens_out = _int(usage.get("output_tokens"))
        cost = event.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            report.cost_usd = float(cost)
        text = _text(event.get("result"), 20_000)
        if event.get("is_error") or str(event.get("subtype", "success")) != "success":
            report.error = text or str(event.get("subtype"))
        elif text:
            report.final_message = text
        report.lines.append(f"done: {event.get('subtype', 'result')}")


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
    elif kind == "turn.completed":
        usage = _map(event.get("usage"))
        report.tokens_in += _int(usage.get("input_tokens"))
        report.tokens_out += _int(usage.get("output_tokens"))
    elif kind in ("turn.failed", "error"):
        error = _map(event.get("error")) or event
        report.error = _text(error.get("message")) or str(kind)
        report.lines.append(f"error: {report.error}")


def _gemini(event: dict[str, Any], report: AgentReport, pieces: list[str]) -> None:
    kind = event.get("type")
    if kind == "message" and event.get("role") == "assistant":
        if not event.get("delta"):
            pieces.clear()
        pieces.append(_text(event.get("content"), 20_000))
        return
    if pieces:  # an assistant message ended
        text = "".join(pieces)
        report.final_message = text
        report.lines.append(f"assistant: {text[:2000]}")
        pieces.clear()
    if kind == "tool_use":
        report.lines.append(f"tool: {_text(event.get('tool_name'), 80)} "
                            f"{_brief(event.get('parameters'))}")
    elif kind == "tool_result":
        report.lines.append(f"result ({event.get('status')}): {_brief(event.get('output'))}")
    elif kind == "result":
        stats = _map(event.get("stats"))
        report.tokens_in = _int(stats.get("input_tokens"))
        report.tokens_out = _int(stats.get("output_tokens"))
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


def _feed(adapter: str, event: dict[str, Any], report: AgentReport,
          pieces: list[str]) -> None:
    report.events += 1
    if adapter == "claude":
        _claude(event, report)
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
    for event in json_lines(lines):
        _feed(adapter, event, report, pieces)
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
