"""Every record that could not be read: file, line, reason."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from console.model import Problem
from console.sdd.sanitize import data_text
from console.tui.screens.narrow import FitsNarrow
from console.tui.widgets.list_table import ListTable, sync_rows


class ProblemsScreen(FitsNarrow, Screen[None]):
    AUTO_FOCUS = "DataTable"  # its content, from the first key
    BINDINGS = [Binding("escape,p,q", "app.pop_screen", "Back")]

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__()
        self.problems = problems

    def compose(self) -> ComposeResult:
        count = len(self.problems)
        yield Static(f"{count} record{'s' if count != 1 else ''} could not be read; "
                     "everything else is shown", id="problems-title", markup=False)
        yield ListTable(id="problems-table", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("File", key="file")
        table.add_column("Line", key="line")
        table.add_column("Reason", key="reason")
        sync_rows(table, [(str(index), [data_text(problem.file),
                                        data_text("" if problem.line is None else problem.line),
                                        data_text(problem.reason, limit=2000)])
                          for index, problem in enumerate(self.problems)])
