"""The event history screen (#19.2): every engine event, operator action with its
outcome, SLA event, gate block, phase gate, proposal decision and notification, newest
first, filtered as you type; Enter on a task's entry goes to that task."""

from __future__ import annotations

import time
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from console.sdd.sanitize import CELL_LIMIT, data_text
from console.sdd.source_protocol import Source
from console.tui.history import HISTORY, Entry, Session, entries
from console.tui.messages import ShowTask
from console.tui.screens.built_view import BuiltView
from console.tui.screens.narrow import FitsNarrow
from console.tui.widgets.list_table import ListTable, Row, sync_rows

MARKS = {"information": "·", "warning": "⚠", "error": "✗"}


def _when(timestamp: float) -> str:
    if not timestamp:
        return "-"
    return time.strftime("%m-%d %H:%M:%S", time.localtime(timestamp))


class HistoryScreen(FitsNarrow, BuiltView, Screen[None]):
    AUTO_FOCUS = "#history-table"
    SECTIONS: ClassVar[frozenset[str]] = frozenset(
        {"engine", "sla", "phase_gates", "gates", "proposals", HISTORY})
    BINDINGS = [Binding("escape,q,L", "back", "Back"),
                Binding("slash", "filter", "Filter")]

    def __init__(self, source: Source, session: Session) -> None:
        super().__init__()
        self.source = source  # read under its lock: the watcher thread writes the State
        self.session = session
        self.needle = ""
        self._shown: dict[str, Entry] = {}

    def compose(self) -> ComposeResult:
        yield Static("Event history — newest first · / filter · enter: the entry's task",
                     classes="screen-title", markup=False)
        yield Input(placeholder="filter: any words of the kind, task or text",
                    id="history-filter")
        yield ListTable(id="history-table", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in (("when", "When"), ("kind", "Kind"), ("task", "Task"),
                           ("text", "What happened")):
            table.add_column(label, key=key)
        self.refresh_rows()

    def build_view(self) -> list[tuple[Row, Entry]]:
        needle = self.needle
        with self.source.lock:
            found = entries(self.source.state, self.session)
        rows: list[tuple[Row, Entry]] = []
        seen: set[str] = set()
        for entry in found:
            if not entry.matches(needle) or entry.key in seen:
                continue
            seen.add(entry.key)
            rows.append(((entry.key, [data_text(_when(entry.timestamp)),
                                      data_text(f"{MARKS.get(entry.severity, '·')} "
                                                f"{entry.kind}"),
                                      data_text(entry.task_id, limit=CELL_LIMIT),
                                      data_text(entry.text, limit=2000)]), entry))
        return rows

    def show_view(self, view: list[tuple[Row, Entry]]) -> None:
        self._shown = {row[0]: entry for row, entry in view}
        sync_rows(self.query_one(DataTable), [row for row, _entry in view])

    def on_input_changed(self, event: Input.Changed) -> None:
        self.needle = event.value.strip().lower()
        self.refresh_rows()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        entry = self._shown.get(str(event.row_key.value))
        if entry is not None and entry.task_id:
            self.post_message(ShowTask(entry.task_id))

    def action_filter(self) -> None:
        self.query_one(Input).focus()

    def action_back(self) -> None:
        if self.query_one(Input).has_focus and self.needle:
            self.query_one(Input).value = ""
            return
        self.app.pop_screen()
