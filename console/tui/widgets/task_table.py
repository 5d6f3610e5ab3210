"""The task table: a virtual, keyed table that draws only the rows on screen.

Rows live in a dict keyed by task id; the view is the list of ids that pass the
filter, in the chosen order. An update replaces rows by key and repaints; with
no filter and no sort a new task is appended to the view in O(1), otherwise the
view is rebuilt once per burst (a short timer coalesces many updates). Nothing
is cleared and refilled, and 10,000 rows cost what 40 visible lines cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.color import Color
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.tui.contrast import readable
from console.tui.task_rows import COLUMNS, SORT_KEYS, Predicate, TaskRow
from console.tui.widgets.table_layout import COMPACT_LABELS, Layout, compact_cell, fit

REBUILD_DELAY_S = 0.05
#: a filtered or sorted view over at least this many rows, asked for with `off_loop`,
#: is computed in a thread (the filter box keeps up with the keys)
OFF_LOOP_ROWS = 2000
PAN_CELLS = 8  # cells → and ← scroll a line too wide for the terminal
STATE_CLASSES = {
    "failed": "failed", "orphaned": "failed", "abandoned": "failed", "refused": "failed",
    "done": "done", "closed": "done", "claimed": "running", "in_progress": "running",
    "blocked": "blocked", "blocked_by_failed_dep": "blocked", "blocked_by_abandon": "blocked",
    "suspended": "blocked", "cancelled": "muted",
}


def view_of(order: Iterable[str], rows: Mapping[str, TaskRow], predicate: Predicate | None,
            sort_key: str | None, reverse: bool, now: float) -> list[str]:
    """The ids shown: those `predicate` keeps, in log order or sorted by `sort_key`."""
    view = [i for i in order if predicate is None or predicate(rows[i], now)]
    if sort_key is not None:
        key = SORT_KEYS[sort_key]
        view.sort(key=lambda i: key(rows[i]),  # type: ignore[arg-type, return-value]  # keys of mixed but comparable kinds
                  reverse=reverse)
    return view


class TaskTable(ScrollView, can_focus=True):
    """One line per task; a pinned header line; the cursor follows its task."""

    COMPONENT_CLASSES = {
        "task-table--header", "task-table--cursor", "task-table--odd", "task-table--failed",
        "task-table--done", "task-table--running", "task-table--blocked", "task-table--muted",
        "task-table--risk",
    }
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "edge(0)", "First", show=False),
        Binding("end,G", "edge(1)", "Last", show=False),
        Binding("right", "pan(1)", "Scroll right", show=False),
        Binding("left", "pan(-1)", "Scroll left", show=False),
        Binding("s", "sort_next", "Sort", show=False),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
    ]

    class Highlighted(Message):
        """The task under the cursor changed (None: the view is empty)."""

        def __init__(self, task_id: str | None) -> None:
            super().__init__()
            self.task_id = task_id

    class ViewChanged(Message):
        """The filter, the sort or the number of rows shown changed."""

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.rows: dict[str, TaskRow] = {}
        self._order: dict[str, None] = {}  # ids in the task log's order
        self.deadlined: set[str] = set()  # tasks with a deadline, for the SLA strip
        self.view: list[str] = []
        self._pos: dict[str, int] = {}  # task id → its index in the view
        self.cursor = 0
        self.predicate: Predicate | None = None
        self.sort_key: str | None = None
        self.reverse = False
        self._rebuild_timer: object | None = None
        self._highlighted: str | None = None
        self._readable_cache: dict[tuple[str, str], Style] = {}  # (theme, component)
        self._layout: Layout | None = None
        self._layout_width = 0
        self._view_asked = 0  # views asked for (the newest one is shown)
        self._rows_changed = 0  # batches of rows applied

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    # -- data ------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.view)

    @property
    def task_ids(self) -> list[str]:
        return list(self.view)

    @property
    def current(self) -> str | None:
        return self.view[self.cursor] if self.view else None

    def cell(self, task_id: str, column: str) -> str:
        """What one cell shows now (for tests and copy)."""
        keys = [c.key for c in COLUMNS]
        return self.rows[task_id].cells(self.clock())[keys.index(column)]

    def apply(self, rows: Mapping[str, TaskRow | None]) -> None:
        """Rows by task id; None removes the task."""
        if not rows:
            return
        self._rows_changed += 1
        plain = self.predicate is None and self.sort_key is None
        removed = False
        for task_id, row in rows.items():
            if row is None:
                if self.rows.pop(task_id, None) is not None:
                    self._order.pop(task_id, None)
                    self.deadlined.discard(task_id)
                    removed = True
                continue
            if row.deadline is None:
                self.deadlined.discard(task_id)
            else:
                self.deadlined.add(task_id)
            if task_id not in self.rows:
                self._order[task_id] = None
                if plain and not removed:
                    self._pos[task_id] = len(self.view)
                    self.view.append(task_id)
            self.rows[task_id] = row
        if plain and not removed:
            self._resized()
            self._follow_cursor()
            # only the lines on screen whose rows changed are drawn again (a change below
            # the fold moves the scrollbar only)
            lines = [line for line in (self._line_of(task_id) for task_id in rows)
                     if line is not None]
            if lines:
                self.refresh(*lines)
        else:
            # a removed task must leave the view now: drawing it would find no row
            self._schedule_rebuild(at_once=removed)
            self.refresh()

    def _line_of(self, task_id: str) -> Region | None:
        """The screen line a task's row is on, None when it is not on screen."""
        index = self._pos.get(task_id)
        top = int(self.scroll_y)
        if index is None or not top <= index < top + self.size.height - 1:
            return None
        return Region(0, index - top + 1, self.size.width, 1)

    def set_view(self, predicate: Predicate | None, sort_key: str | None,
                 reverse: bool, *, off_loop: bool = False) -> None:
        self.predicate, self.sort_key, self.reverse = predicate, sort_key, reverse
        if not off_loop or len(self._order) < OFF_LOOP_ROWS:
            self._rebuild()
            return
        self._view_asked += 1
        asked, rows_seen = self._view_asked, self._rows_changed
        order, rows, now = list(self._order), dict(self.rows), self.clock()

        def compute() -> None:
            view = view_of(order, rows, predicate, sort_key, reverse, now)
            self.app.call_from_thread(self._computed, asked, rows_seen, view)

        self.run_worker(compute, thread=True, group="view", exclusive=True,
                        exit_on_error=False, name="filtering the task table")

    def _computed(self, asked: int, rows_seen: int, view: list[str]) -> None:
        """A view computed in a thread: shown unless a newer one was asked for; rows
        that changed meanwhile are put right by a rebuild."""
        if asked != self._view_asked or not self.is_attached:
            return
        self._show_view([task_id for task_id in view if task_id in self.rows])
        if rows_seen != self._rows_changed:
            self._schedule_rebuild()

    def _schedule_rebuild(self, *, at_once: bool = False) -> None:
        if at_once:
            self._rebuild()
        elif self._rebuild_timer is None:
            self._rebuild_timer = self.set_timer(REBUILD_DELAY_S, self._rebuild)

    def _rebuild(self) -> None:
        self._rebuild_timer = None
        self._view_asked += 1  # a view still being computed in a thread is older
        self._show_view(view_of(self._order, self.rows, self.predicate, self.sort_key,
                                self.reverse, self.clock()))

    def _show_view(self, view: list[str]) -> None:
        keep = self.current
        self.view = view
        self._pos = {task_id: index for index, task_id in enumerate(view)}
        if keep is not None and keep in self._pos:
            self.cursor = self._pos[keep]
        else:
            self.cursor = min(self.cursor, max(0, len(view) - 1))
        self._resized()
        self._scroll_to_cursor()
        self._follow_cursor()
        self.post_message(self.ViewChanged())
        self.refresh()

    @property
    def line_width(self) -> int:
        """Cells a line shows: the width less a vertical scrollbar's."""
        return self.scrollable_content_region.width

    def _resized(self) -> None:
        width = self.line_width
        if self._layout is None or self._layout_width != width:
            self._layout, self._layout_width = fit(width), width
        self.virtual_size = Size(self._layout.total, len(self.view) + 1)

    @property
    def fitted(self) -> Layout:
        """The columns shown at the table's width (narrower: fewer, or as glyphs)."""
        self._resized()
        assert self._layout is not None
        return self._layout

    def _follow_cursor(self) -> None:
        current = self.current
        if current != self._highlighted:
            self._highlighted = current
            self.post_message(self.Highlighted(current))

    def _tick(self) -> None:
        """Once a second: countdowns move; a time-dependent filter is re-applied."""
        if self.predicate is not None:
            self._schedule_rebuild()
        top = int(self.scroll_y)
        visible = self.view[top:top + self.size.height]
        if any(self.rows[i].deadline is not None for i in visible):
            self.refresh()

    # -- cursor and scrolling --------------------------------------------------

    def move_to(self, task_id: str) -> bool:
        if task_id not in self._pos:
            return False
        self.cursor = self._pos[task_id]
        self._scroll_to_cursor()
        self._follow_cursor()
        self.refresh()
        return True

    def _set_cursor(self, index: int) -> None:
        if not self.view:
            return
        self.cursor = max(0, min(index, len(self.view) - 1))
        self._scroll_to_cursor()
        self._follow_cursor()
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        page = max(1, self.size.height - 1)
        top = int(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + page:
            self.scroll_to(y=self.cursor - page + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        self._set_cursor(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self._set_cursor(self.cursor + direction * max(1, self.size.height - 2))

    def action_edge(self, end: int) -> None:
        self._set_cursor(len(self.view) - 1 if end else 0)

    def action_pan(self, direction: int) -> None:
        """→ ←: the columns a narrow terminal cannot show at once, PAN_CELLS at a time."""
        self.scroll_to(x=max(0, self.scroll_x + direction * PAN_CELLS), animate=False)

    def action_sort_next(self) -> None:
        keys = [c.key for c in COLUMNS]
        at = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        self.set_view(self.predicate, keys[at] if at < len(keys) else None, self.reverse)

    def action_sort_reverse(self) -> None:
        self.set_view(self.predicate, self.sort_key, not self.reverse)

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            column = self._column_at(event.x)
            if column is not None:
                same = column == self.sort_key
                self.set_view(self.predicate, column, not self.reverse if same else False)
            return
        self._set_cursor(int(self.scroll_y) + event.y - 1)

    def on_resize(self, event: events.Resize) -> None:
        self._resized()

    # -- drawing ---------------------------------------------------------------

    def _column_at(self, x: int) -> str | None:
        layout = self.fitted
        left = -int(self.scroll_x)
        for index, width in zip(layout.columns, layout.widths, strict=True):
            if left <= x < left + width + 1:
                return COLUMNS[index].key
            left += width + 1
        return None

    def _line(self, texts: list[str], styles: list[Style], width: int,
              header: bool = False) -> Strip:
        """One line: the layout's columns, compact ones as their glyph, each cut with `…`
        to its width; the part the horizontal scroll shows."""
        layout = self.fitted
        segments: list[Segment] = []
        for index, size in zip(layout.columns, layout.widths, strict=True):
            text = texts[index]
            if not header and COLUMNS[index].key in layout.compact:
                text = compact_cell(COLUMNS[index].key, text)
            if cell_len(text) > size:
                text = set_cell_size(text, size - 1) + "…"
            segments.append(Segment(set_cell_size(" " + text, size + 1), styles[index]))
        left = int(self.scroll_x)
        return Strip(segments).crop_extend(left, left + width, styles[-1])

    def _readable(self, component: str) -> Style:
        """A state's component style with its colour made readable on this table's
        backgrounds (plain and odd rows) under the current theme (contrast.py)."""
        key = (self.app.theme, component)
        style = self._readable_cache.get(key)
        if style is None:
            style = self.get_component_rich_style(component)
            if style.color is not None and style.color.triplet is not None:
                background = self.background_colors[1]
                odd = self.get_component_rich_style("task-table--odd").bgcolor
                backgrounds = [background] + ([Color.from_rich_color(odd)] if odd else [])
                fixed = readable(Color.from_rich_color(style.color), *backgrounds)
                style = style + Style(color=fixed.rich_color)
            self._readable_cache[key] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.line_width
        if y == 0:
            style = self.get_component_rich_style("task-table--header")
            compact = self.fitted.compact
            labels = [(COMPACT_LABELS[c.key] if c.key in compact else c.label)
                      + (("▼" if self.reverse else "▲") if c.key == self.sort_key else "")
                      for c in COLUMNS]
            return self._line(labels, [style] * len(COLUMNS), width, header=True)
        index = int(self.scroll_y) + y - 1
        base = self.rich_style
        if index >= len(self.view):
            return Strip.blank(width, base)
        row = self.rows[self.view[index]]
        now = self.clock()
        if index % 2:
            base = base + self.get_component_rich_style("task-table--odd")
        styles = [base] * len(COLUMNS)
        state_class = STATE_CLASSES.get(row.status)
        if state_class:
            styles[0] = base + self._readable(f"task-table--{state_class}")
        if row.at_risk(now):
            styles[7] = base + self._readable("task-table--risk")
        if row.gates_fail:
            styles[6] = base + self._readable("task-table--failed")
        if index == self.cursor:
            cursor = self.get_component_rich_style("task-table--cursor")
            styles = [s + cursor for s in styles]
        return self._line(list(row.cells(now)), styles, width)
