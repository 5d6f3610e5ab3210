"""The header: where we are, the engine (workers busy/total, paused), cost so far,
pending proposals and problems, then the tasks per state (glyph and word).

Each part is kept whole: the parts flow into lines of the header's width (two on
most projects), so a project with every state on a narrow terminal gets a third
line instead of a count cut in two or the engine pushed out of sight.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual import events

from console.model import TaskState, state_label
from console.sdd.sanitize import display_text
from console.tui.updates import Header
from console.tui.widgets.lines import Lines

PART_GAP = "  ·  "
COUNT_GAP = "  "


def count_parts(counts: dict[str, int]) -> list[str]:
    total = sum(counts.values())
    known = [s.value for s in TaskState if counts.get(s.value)]
    unknown = sorted(k for k in counts if k not in known)
    parts = [f"{state_label(state)} {counts[state]}" for state in known + unknown]
    # the total goes with the first count, never alone at the end of a line
    return [f"{total} tasks:" + (f"{COUNT_GAP}{parts[0]}" if parts else ""), *parts[1:]]


def engine_text(header: Header, fallback: str, *, own: bool = True,
                status_live: bool = True) -> str:
    """The engine's figures from `engine_status.json`, or `fallback` (the console's own
    line) when there are none or they are stale (`status_live` False: nobody holds the
    project, whatever the file says). `own` False: not this console's engine."""
    engine = header.engine
    if engine is None or not engine.running or not status_live:
        return fallback
    paused = "  ‖ PAUSED (z resumes)" if engine.paused else ""
    whose = "" if own else " (not started here; keeps running when you quit)"
    return (f"engine pid {engine.pid}{whose}: {engine.busy}/{engine.workers} workers busy"
            f"{paused}" + (f" · base {engine.base}" if engine.base else ""))


def reading_text(progress: tuple[int, int]) -> str:
    """The first full read, as it goes: the figures beside it are so far, not final."""
    done, total = progress
    return (f"↻ reading .sdd/: {done / 1e6:.1f} of {total / 1e6:.1f} MB "
            f"({done / total:.0%}) — figures so far")


def context_parts(where: str, header: Header, engine_line: str, notice: str = "",
                  alert: str = "", *, own: bool = True, status_live: bool = True,
                  reading: tuple[int, int] | None = None) -> list[str]:
    """`notice`: why the project is watch-only; `alert`: what stops the engine right now
    (a full disk), shown instead of its figures; `reading`: (bytes read, total) while
    the first read runs — cost and counts are marked as not final."""
    so_far = "~" if reading else ""
    parts = [where, *([reading_text(reading)] if reading else []),
             *([notice] if notice else []),
             f"⚠ {alert}" if alert else engine_text(header, engine_line, own=own,
                                                    status_live=status_live),
             f"cost {so_far}${header.cost_usd:.4f}"]
    if header.pending_proposals:
        parts.append(f"! {header.pending_proposals} proposal"
                     f"{'s' if header.pending_proposals != 1 else ''} pending (P)")
    if header.problems:
        parts.append(f"⚠ {header.problems} problem{'s' if header.problems != 1 else ''} (p)")
    return parts


def pack(parts: list[tuple[str, str]], width: int) -> list[str]:
    """(gap before it, part) pairs: whole parts, as many per line as fit in `width`
    cells (a part wider than a line gets a line of its own, cut by the widget)."""
    lines: list[str] = []
    line = ""
    for gap, part in parts:
        joined = f"{line}{gap}{part}" if line else part
        if line and cell_len(joined) > width:
            lines.append(line)
            line = part
        else:
            line = joined
    if line:
        lines.append(line)
    return lines


def summary_text(where: str, header: Header, engine_line: str, width: int,
                 notice: str = "", alert: str = "", *, own: bool = True,
                 status_live: bool = True, reading: tuple[int, int] | None = None) -> str:
    counts = count_parts(header.counts)
    if reading and counts:
        counts[0] = "~" + counts[0]  # "~1234 tasks:" until the read is done
    parts = ([(PART_GAP, part)
              for part in context_parts(where, header, engine_line, notice, alert,
                                        own=own, status_live=status_live,
                                        reading=reading)]
             + [(PART_GAP, counts[0])] + [(COUNT_GAP, part) for part in counts[1:]])
    # the path, the branch, states and engine messages are data: each part one safe line
    parts = [(gap, display_text(part)) for gap, part in parts]
    return "\n".join(pack(parts, width))


class StatusBar(Lines):
    """Re-rendered from the header figures each batch carries, and on resize."""

    def __init__(self, where: str, **kwargs: Any) -> None:
        super().__init__(display_text(where), markup=False, **kwargs)
        self.where = where
        self.engine_line = "engine: off (watching only)"
        self.alert = ""
        self.header = Header({}, 0, None, 0.0, 0)
        self.notice = ""  # why the project is watch-only (untrusted), and how to trust it
        self.own = True  # the engine figures are this console's engine's
        self.status_live = True  # engine_status.json's "running" is not stale
        self.reading: tuple[int, int] | None = None  # the first full read's progress

    def _width(self) -> int:
        width = self.content_region.width
        return width if width > 0 else max(20, self.app.size.width - 2)

    def show(self, header: Header | None = None, engine_line: str | None = None,
             notice: str | None = None, alert: str | None = None, *,
             own: bool | None = None, status_live: bool | None = None,
             reading: tuple[int, int] | bool | None = False) -> None:
        """`reading`: the read's (done, total), None once it is over; False: unchanged."""
        if reading is not False:
            self.reading = reading if isinstance(reading, tuple) else None
        if own is not None:
            self.own = own
        if status_live is not None:
            self.status_live = status_live
        if header is not None:
            self.header = header
        if engine_line is not None:
            self.engine_line = engine_line
        if notice is not None:
            self.notice = notice
        if alert is not None:
            self.alert = alert
        # most batches change no figure shown here: then nothing is drawn
        self.show_lines(summary_text(self.where, self.header, self.engine_line, self._width(),
                                     self.notice, self.alert, own=self.own,
                                     status_live=self.status_live, reading=self.reading))
        self.set_class(self.reading is not None, "-reading")
        self.set_class(bool(self.notice), "-untrusted")
        self.set_class(self.header.problems > 0 or bool(self.alert), "-problems")
        self.set_class(bool(self.header.engine and self.header.engine.paused), "-paused")

    def on_resize(self, event: events.Resize) -> None:
        self.show()
