"""Every binding, grouped: made from the same table as the bindings themselves."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.tui.keys import MAIN_KEYS, OTHER_KEYS, key_label
from console.tui.screens.narrow import FitsNarrow

ACTIONS = frozenset({"retry", "escalate", "cancel_task", "pause"})


def help_table(read_only: bool) -> Table:
    table = Table(box=None, expand=True, show_header=False)
    table.add_column("key", style="bold", width=22)
    table.add_column("what")
    group = None
    for name, key, action, _label, description, _shown in MAIN_KEYS:
        if name != group:
            table.add_row("", "")
            table.add_row(f"── {name}", "")
            group = name
        note = " (refused: read-only)" if read_only and action in ACTIONS else ""
        table.add_row(key_label(key), description + note)
    group = None
    for name, key, description in OTHER_KEYS:
        if name != group:
            table.add_row("", "")
            table.add_row(f"── {name}", "")
            group = name
        table.add_row(key, description)
    return table


class HelpScreen(FitsNarrow, Screen[None]):
    AUTO_FOCUS = "*"  # its content, from the first key
    BINDINGS = [Binding("escape,q,question_mark,f1", "app.pop_screen", "Back")]

    def __init__(self, read_only: bool) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        yield Static("Keys — every binding, grouped (ctrl+p finds tasks, proposals and "
                     "actions by name)", classes="screen-title", markup=False)
        with VerticalScroll(id="help-body"):
            yield Static(help_table(self.read_only), id="help")
        yield Footer()
