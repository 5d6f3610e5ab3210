"""The task table: one row per task id, updated cell by cell as deltas arrive."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from console.model import Task, state_label
from console.sdd.state import Delta

COLUMNS = (("state", "State"), ("id", "ID"), ("title", "Title"), ("role", "Role"),
           ("priority", "P"))


def row_of(task: Task) -> tuple[str, ...]:
    return (state_label(task.status), task.id, task.title, task.role, f"P{task.priority}")


def cell(value: str) -> Text:
    """Text from files is shown as written: never parsed as markup."""
    return Text(value, no_wrap=True, overflow="ellipsis")


class TaskTable(DataTable[Text]):
    """Keyed rows: an upsert touches only the cells that changed; nothing is refilled."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._rows: dict[str, tuple[str, ...]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def task_ids(self) -> list[str]:
        return list(self._rows)

    def apply(self, delta: Delta) -> None:
        for task_id in delta.removed:
            if self._rows.pop(task_id, None) is not None:
                self.remove_row(task_id)
        for task_id, task in delta.upserts.items():
            new = row_of(task)
            old = self._rows.get(task_id)
            if old is None:
                self.add_row(*(cell(value) for value in new), key=task_id)
            else:
                for (column, _), before, after in zip(COLUMNS, old, new, strict=True):
                    if before != after:
                        self.update_cell(task_id, column, cell(after), update_width=True)
            self._rows[task_id] = new
