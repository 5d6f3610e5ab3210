"""The console's DataTables: `ListTable` moves like every list of the console (j k and
g G as well as the arrows, Home and End; Enter selects the row), and `sync_rows` is the
keyed sync of its rows (the way Dolphie's process list does it): the table is
made to show exactly the given rows, in their order, by removing the rows that left,
updating only the cells that changed and adding the new rows — all in one
`batch_update()`, with the cursor kept on its row. Nothing is cleared and refilled, so
the cursor and the scroll position survive a refresh.

Every DataTable of the console goes through `sync_rows` (the task table is a virtual,
keyed table of its own: widgets/task_table.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

#: a row: its key, then one cell per column (in the table's column order)
Row = tuple[str, Sequence[RenderableType]]


class ListTable(DataTable[RenderableType]):
    BINDINGS = [Binding("j", "cursor_down", "Down", show=False),
                Binding("k", "cursor_up", "Up", show=False),
                Binding("g", "scroll_top", "First", show=False),
                Binding("G", "scroll_bottom", "Last", show=False)]


def sync_rows(table: DataTable[RenderableType], rows: Sequence[Row]) -> None:
    wanted = dict(rows)
    if len(wanted) != len(rows):
        raise ValueError("sync_rows: two rows share a key")
    cursor = _cursor_key(table)
    columns = [column.key for column in table.ordered_columns]
    with table.app.batch_update():
        for row_key in [key for key in table.rows if key.value not in wanted]:
            table.remove_row(row_key)
        for key, cells in rows:
            if key not in table.rows:
                table.add_row(*cells, key=key)
                continue
            for column, new, old in zip(columns, cells, table.get_row(key), strict=True):
                if new != old:
                    table.update_cell(key, column, new)
        _put_in_order(table, [key for key, _cells in rows], columns[0] if columns else None)
        if cursor is not None and cursor in table.rows:
            index = table.get_row_index(cursor)
            if index != table.cursor_row:
                table.move_cursor(row=index, animate=False)


def _cursor_key(table: DataTable[RenderableType]) -> str | None:
    if not table.row_count or not table.is_valid_row_index(table.cursor_row):
        return None
    key = table.ordered_rows[table.cursor_row].key.value
    return None if key is None else str(key)


def _put_in_order(table: DataTable[RenderableType], order: list[str],
                  first_column: ColumnKey | None) -> None:
    """Re-sort to `order` when the rows are not in it already. DataTable sorts by cell
    values only, so each row is ranked by its first cell object's identity (every row
    has its own); should two rows share one object, the table is refilled instead."""
    if first_column is None or [row.key.value for row in table.ordered_rows] == order:
        return
    rank = {id(table.get_cell(key, first_column)): index for index, key in enumerate(order)}
    if len(rank) == len(order):
        table.sort(first_column, key=lambda cell: rank[id(cell)])
        return
    rows = [(key, table.get_row(key)) for key in order]
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
