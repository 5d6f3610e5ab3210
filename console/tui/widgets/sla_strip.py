"""The SLA strip: the unfinished tasks closest to their deadline, with countdown bars.

Warning and violated are said by glyph and word; colour only repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content

from console.sdd.sanitize import display_text
from console.tui.task_rows import TaskRow, countdown
from console.tui.widgets.lines import Lines

STRIP_ROWS = 4
BAR_WIDTH = 20


def strip_text(rows: Iterable[TaskRow], now: float, limit: int = STRIP_ROWS) -> Content | None:
    """None when no unfinished task has a deadline."""
    live = sorted((r for r in rows if r.deadline is not None and not r.terminal),
                  key=lambda r: (r.deadline, r.id))
    if not live:
        return None
    parts: list[str | tuple[str, str]] = []
    for row in live[:limit]:
        assert row.deadline is not None
        left = row.deadline - now
        if left < 0 or row.sla == "violated":
            label, style = "✗ violated", "$error bold"
        elif row.sla == "warning":
            label, style = "⚠ warning ", "$warning bold"
        else:
            label, style = "◷ on time ", "$success"
        start = row.created_at if row.created_at is not None else row.deadline - 3600
        span = max(1e-9, row.deadline - start)
        used = min(1.0, max(0.0, (now - start) / span))
        filled = round(used * BAR_WIDTH)
        when = f"{countdown(-left)} over" if left < 0 else f"{countdown(left)} left"
        if parts:
            parts.append("\n")
        parts += [(f"{label} ", style), f"{display_text(row.id):<13.13} ", ("█" * filled, style),
                  ("░" * (BAR_WIDTH - filled), "$text-muted"), f" {when:<12} {row.title}"]
    if len(live) > limit:
        parts.append(f"\n… {len(live) - limit} more with deadlines (7: SLA at risk)")
    return Content.assemble(*parts)


class SlaStrip(Lines):
    def show(self, rows: Iterable[TaskRow], now: float) -> None:
        """Called every second: repaints only when a countdown moved."""
        text = strip_text(rows, now)
        self.display = text is not None
        if text is not None:
            self.show_lines(text)
