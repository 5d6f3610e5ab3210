"""The review queue (issue #20.6, seed 000): work that passed but that a check wants a
human to look at — an `llm_judge` that accepted with confidence below 0.7, a review
answer flagged — newest first, from metrics/review_queue.jsonl. Enter goes to the task
(its Summary, Log and Gates tabs hold the work to look at).
"""

from __future__ import annotations

import time
from typing import ClassVar

from textual.binding import Binding
from textual.widgets import DataTable, Static

from console.model import ReviewFlag
from console.sdd.sanitize import CELL_LIMIT, data_text
from console.sdd.source_protocol import Source
from console.tui.messages import ShowTask
from console.tui.screens.table_screen import TableScreen
from console.tui.widgets.list_table import Row, sync_rows

COLUMNS = (("when", "When"), ("task", "Task"), ("attempt", "Try"), ("source", "Check"),
           ("detail", "Why it wants a human"))


def flag_rows(flags: list[ReviewFlag]) -> list[tuple[str, ReviewFlag]]:
    """(row key, flag), newest first; a task flagged on several attempts keeps each."""
    ordered = sorted(enumerate(flags), key=lambda pair: (pair[1].timestamp or 0.0, pair[0]),
                     reverse=True)
    return [(f"{index}", flag) for index, flag in ordered]


def queue_line(flags: list[ReviewFlag]) -> str:
    if not flags:
        return ("Nothing waits for a human review: a judge that accepts below 0.7 "
                "confidence puts its task here.")
    tasks = len({f.task_id for f in flags})
    return (f"{len(flags)} flag{'s' if len(flags) != 1 else ''} on {tasks} task"
            f"{'s' if tasks != 1 else ''}: passed, but a check wants a human to look "
            "(Enter: the task)")


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "—"
    return time.strftime("%m-%d %H:%M:%S", time.localtime(timestamp))


class ReviewQueueScreen(TableScreen):
    TITLE_ID, TABLE_ID = "review-line", "review-table"
    COLUMNS = COLUMNS
    SECTIONS: ClassVar[frozenset[str]] = frozenset({"reviews"})
    BINDINGS = [Binding("escape,q,V", "app.pop_screen", "Back")]

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        self._shown: dict[str, ReviewFlag] = {}

    def build_view(self) -> list[tuple[str, ReviewFlag]]:
        with self.source.lock:
            flags = list(self.source.state.review_queue)
        return flag_rows(flags)

    def show_view(self, view: list[tuple[str, ReviewFlag]]) -> None:
        self._shown = dict(view)
        flags = [flag for _key, flag in view]
        self.query_one("#review-line", Static).update(data_text(queue_line(flags)))
        rows: list[Row] = [(key, [data_text(_when(flag.timestamp)),
                                  data_text(flag.task_id, limit=CELL_LIMIT),
                                  data_text("" if flag.attempt is None else flag.attempt),
                                  data_text(flag.source, limit=CELL_LIMIT),
                                  data_text(flag.detail, limit=2000)])
                           for key, flag in view]
        sync_rows(self.query_one(DataTable), rows)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        flag = self._shown.get(str(event.row_key.value))
        if flag is not None:
            self.post_message(ShowTask(flag.task_id))
