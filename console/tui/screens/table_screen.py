"""A full screen of one list (chains, missions, the review queue): a title line, the
table and the footer, its columns set on mount and its rows built off the event loop
(BuiltView), fitting narrow terminals (FitsNarrow). A subclass names its ids and
columns and defines build_view / show_view.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from console.tui.screens.built_view import BuiltView
from console.tui.screens.narrow import FitsNarrow
from console.tui.widgets.list_table import ListTable


class TableScreen(FitsNarrow, BuiltView, Screen[None]):
    AUTO_FOCUS = "DataTable"  # its content, from the first key
    TITLE_ID: ClassVar[str]  # the title line's id
    TABLE_ID: ClassVar[str]
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]]  # (key, label)

    def compose(self) -> ComposeResult:
        yield Static("", id=self.TITLE_ID, classes="screen-title", markup=False)
        yield ListTable(id=self.TABLE_ID, cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for key, label in self.COLUMNS:
            table.add_column(label, key=key)
        self.refresh_rows()
