"""Every cascade chain: the ladder each task climbed, its cost, and what the
cascade saved against sending everything straight to the top tier."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.sdd.sanitize import CELL_LIMIT, data_text
from console.sdd.source_protocol import Source
from console.sdd.state import State
from console.tui.messages import ShowTask
from console.tui.quality import chain_totals
from console.tui.screens.table_screen import TableScreen
from console.tui.widgets.list_table import Row, sync_rows

#: the table keeps the most recent chains; the totals count every one
MAX_CHAIN_ROWS = 1000
COLUMNS = (("chain", "Chain"), ("task", "Task"), ("role", "Role"), ("ladder", "Models tried"),
           ("outcome", "Outcome"), ("cost", "Cost"), ("saved", "Saved"),
           ("why", "Escalated because"))


def chain_rows(state: State) -> list[tuple[str, ...]]:
    chains = sorted(state.chains.values(), key=lambda c: (c.timestamp or 0.0, c.chain_id),
                    reverse=True)[:MAX_CHAIN_ROWS]
    return [(c.chain_id, c.task_id, c.role, " → ".join(a.model for a in c.attempts),
             ("✓ succeeded" if c.succeeded else "✗ gave up") + f" on {c.final_model or '?'}",
             f"${c.total_cost_usd:.4f}", f"${c.saved_vs_direct_opus_usd:.4f}",
             next((a.escalation_reason or "" for a in c.attempts if a.escalation_reason), ""))
            for c in chains]


def totals_text(state: State) -> str:
    totals = chain_totals(state)
    if not totals.total:
        return "No cascade chain finished yet."
    rate = totals.escalation_rate or 0.0
    shown = (f" (the latest {MAX_CHAIN_ROWS} listed)" if totals.total > MAX_CHAIN_ROWS else "")
    return (f"{totals.total} chains{shown}  ·  {totals.escalated} escalated ({rate:.0%})  ·  "
            f"{totals.succeeded} succeeded  ·  cost ${totals.cost_usd:.4f}  ·  escalation "
            f"overhead ${totals.overhead_usd:.4f}  ·  saved vs straight to the top tier "
            f"${totals.saved_usd:.4f}")


class ChainsScreen(TableScreen):
    TITLE_ID, TABLE_ID = "chains-totals", "chains-table"
    COLUMNS = COLUMNS
    SECTIONS: ClassVar[frozenset[str]] = frozenset({"chains"})
    BINDINGS = [Binding("escape,q,C", "app.pop_screen", "Back")]  # enter: the task

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source  # read under its lock: the watcher thread writes the State
        self.task_of: dict[str, str] = {}  # chain id → its task id

    def build_view(self) -> tuple[list[Row], str, dict[str, str]]:
        """In a worker thread: the rows, newest first, the totals line and each chain's
        task."""
        with self.source.lock:
            rows = chain_rows(self.source.state)
            totals = totals_text(self.source.state)
        cells: list[Row] = [(row[0], [data_text(v, limit=CELL_LIMIT) for v in row])
                            for row in rows]
        return cells, totals, {row[0]: row[1] for row in rows}

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a chain: back to the main screen, on its task."""
        task_id = self.task_of.get(str(event.row_key.value))
        if task_id is not None:
            self.post_message(ShowTask(task_id))

    def show_view(self, view: tuple[list[Row], str, dict[str, str]]) -> None:
        rows, totals, self.task_of = view
        self.query_one("#chains-totals", Static).update(totals)
        sync_rows(self.query_one(DataTable), rows)
