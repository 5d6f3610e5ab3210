"""What the detail tabs show for one task, as Rich renderables built from the State.

Pure functions of the data (no I/O, no widgets), so they are tested directly and
the widget only decides when to call them.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.model import GateReport, GateResult, Reflection, Review, Task, gate_label
from console.sdd.sanitize import data_text, display_text
from console.sdd.state import State


def _empty(text: str) -> Text:
    return Text(text, style="italic")


def gates_view(state: State, task_id: str) -> RenderableType:
    report: GateReport | None = state.gate_reports.get(task_id)
    results: list[GateResult] = list(report.results) if report else []
    if not results:
        latest = state.latest_gates(task_id)
        if not latest:
            return _empty("No gate has run for this task yet.")
        table = Table(box=None, expand=True)
        for column in ("gate", "status", "required", "cached", "ms"):
            table.add_column(column)
        for line in latest.values():
            table.add_row(data_text(line.gate), data_text(gate_label(line.status)),
                          "yes" if line.required else "no", "yes" if line.cached else "",
                          str(line.duration_ms))
        return table
    table = Table(box=None, expand=True)
    for column in ("gate", "status", "required", "cached", "ms", "details"):
        table.add_column(column, overflow="fold")
    for r in results:
        mark = " BLOCKS" if r.blocked else ""
        table.add_row(data_text(r.name),
                      data_text(gate_label(r.status) + mark),
                      "yes" if r.required else "no", "yes" if r.cached else "",
                      str(r.duration_ms), data_text(r.details, multiline=True))
    parts: list[RenderableType] = [table]
    verdict = "no required gate blocks" if report and report.overall_pass else "BLOCKED"
    parts.append(Text(f"{verdict} · {len(report.changed_files) if report else 0} changed file(s)"
                      f" · {report.cache_hits if report else 0} cached", style="bold"))
    for r in results:
        if r.digest:
            parts.append(Text(f"\n── {display_text(r.name)} digest", style="bold"))
            parts.append(data_text(r.digest, multiline=True))
    return Group(*parts)


def _number(value: object, digits: int) -> Text:
    """A figure from a task record (any JSON value: a hostile one is shown, not raised)."""
    try:
        return Text(f"{float(value or 0):.{digits}f}")  # type: ignore[arg-type]  # any JSON value: a bad one raises, caught below
    except (TypeError, ValueError, OverflowError):
        return data_text(value, limit=20)


def _attempt_rows(attempts: list[dict[str, Any]]) -> Table:
    table = Table(box=None, expand=True)
    for column in ("#", "model", "effort", "kind", "result", "cost $", "s", "tokens", "why"):
        table.add_column(column, overflow="fold")
    for a in attempts:
        success = a.get("success")
        result = "▶ running" if success is None else "✓ passed" if success else "✗ failed"
        if a.get("escalated"):
            result += " ↑"
        table.add_row(data_text(a.get("attempt_number", "")), data_text(a.get("model", "")),
                      data_text(a.get("effort") or ""), data_text(a.get("kind") or "agent"),
                      Text(result), _number(a.get("cost_usd"), 4), _number(a.get("latency_s"), 1),
                      data_text(a.get("tokens_used") or 0),
                      data_text(a.get("escalation_reason") or a.get("route_reason") or ""))
    return table


def chain_view(state: State, task: Task) -> RenderableType:
    running = list(task.metadata.get("chain") or [])
    finished = state.chains_of(task.id)
    parts: list[RenderableType] = []
    tier = task.metadata.get("tier")
    if tier:
        parts.append(data_text(f"complexity tier: {tier} ({task.metadata.get('tier_reason', '')})"))
    if running:
        parts.append(Text("Current chain (live)", style="bold"))
        parts.append(_attempt_rows(running))
    for chain in sorted(finished, key=lambda c: c.timestamp or 0):  # (ties: file order)
        outcome = "succeeded" if chain.succeeded else "gave up"
        parts.append(Text(f"\nChain {display_text(chain.chain_id)}: {outcome} on "
                          f"{display_text(chain.final_model)} · "
                          f"${chain.total_cost_usd:.4f} total · escalation overhead "
                          f"${chain.escalation_overhead_usd:.4f} · saved vs direct top tier "
                          f"${chain.saved_vs_direct_opus_usd:.4f}", style="bold"))
        parts.append(_attempt_rows([{
            "attempt_number": a.attempt_number, "model": a.model, "effort": a.effort,
            "success": a.success, "escalated": a.escalated, "cost_usd": a.cost_usd,
            "latency_s": a.latency_s, "tokens_used": a.tokens_used,
            "escalation_reason": a.escalation_reason} for a in chain.attempts]))
    return Group(*parts) if parts else _empty("No attempt has run for this task yet.")


def reflections_view(items: list[Reflection]) -> RenderableType:
    if not items:
        return _empty("No reflections: no iteration of this task has failed.")
    parts: list[RenderableType] = []
    for r in sorted(items, key=lambda x: (x.iteration, x.timestamp or 0)):
        marks = [r.source]
        if r.reused:
            marks.append("reused")
        parts.append(data_text(f"Iteration {r.iteration} · {r.model or '?'} · {r.gate} · "
                               f"{', '.join(marks)}", "bold"))
        for title, body in (("What failed", r.what_failed), ("Why", r.why),
                            ("Try differently", r.try_next), ("Focus", r.focus)):
            parts.append(Text(f"  {title}: ", style="bold") + data_text(body, multiline=True))
        files = display_text(", ".join(r.files_changed) or "none")
        parts.append(Text(f"  Files changed: {files}\n"))
    return Group(*parts)


def review_view(items: list[Review]) -> RenderableType:
    if not items:
        return _empty("No review for this task (reviews run for complex tasks and tickets "
                      "with require_review).")
    review = items[-1]
    table = Table(box=None, expand=True)
    for column in ("judge", "dimension", "score", "reasoning"):
        table.add_column(column, overflow="fold")
    for s in review.scores:
        score = f"{s.score:g}" + (" (dropped)" if s.dropped else "")
        table.add_row(data_text(s.judge), data_text(s.dimension), Text(score),
                      data_text(s.reasoning, multiline=True))
    merged = display_text(", ".join(f"{k} {v:g}" for k, v in review.merged.items()))
    verdict = "passed" if review.passed else "failed"
    head = Text(f"global score {review.global_score} · threshold {review.threshold:g} · "
                f"{verdict}\nmedian per dimension: {merged}", style="bold")
    return Group(head, table)
