"""Which columns the task table shows at a width, and how wide (#19.6).

From 100 columns up every column is whole and the title takes the rest. Narrower, the
table gives way before the title does, one step at a time until the title has
`TITLE_MIN` cells: P, Try and Gates shrink to glyphs, then Role and then Model are
dropped, then State and SLA shrink to their glyph (a glyph is never carried by colour
alone). Still too narrow, the line is as wide as that last layout and the table scrolls
sideways (← →).

Pure functions: the table lays out its cells with them, tests check them.
"""

from __future__ import annotations

import msgspec

from console.tui.task_rows import COLUMNS

TITLE_MIN = 20

#: (column key, compact width or 0 to drop it), in the order the table gives way
STEPS: tuple[tuple[str, int], ...] = (
    ("priority", 2), ("attempt", 3), ("gates", 2), ("role", 0), ("model", 0),
    ("state", 2), ("sla", 3),
)
COMPACT_LABELS = {"priority": "P", "attempt": "Try", "gates": "G", "state": "S",
                  "sla": "SLA"}


class Layout(msgspec.Struct, frozen=True):
    columns: tuple[int, ...]  # indexes into COLUMNS, in order
    widths: tuple[int, ...]  # each one's text width (a cell is one wider: its left pad)
    compact: frozenset[str]  # keys shown as a glyph or shortened
    total: int  # cells a line takes (the viewport's width, or more: then it scrolls)


def _total(widths: dict[int, int]) -> int:
    return sum(width + 1 for width in widths.values())


def fit(width: int) -> Layout:
    title = next(index for index, column in enumerate(COLUMNS) if not column.width)
    widths = {index: column.width for index, column in enumerate(COLUMNS) if index != title}
    compact: set[str] = set()
    steps = iter(STEPS)
    while _total(widths) + TITLE_MIN + 1 > width:
        step = next(steps, None)
        if step is None:
            break
        key, narrower = step
        index = next(i for i, column in enumerate(COLUMNS) if column.key == key)
        if narrower:
            widths[index] = narrower
            compact.add(key)
        else:
            del widths[index]
    widths[title] = max(TITLE_MIN, width - _total(widths) - 1)
    order = tuple(sorted(widths))
    return Layout(order, tuple(widths[i] for i in order), frozenset(compact),
                  max(width, _total(widths)))


def compact_cell(key: str, text: str) -> str:
    """A cell as its column shows it when compact: the glyph or figure that says it."""
    if not text:
        return text
    if key == "priority":
        return text.removeprefix("P")
    if key == "gates":
        return "✗" if "✗" in text else "✓"
    if key in ("state", "sla"):
        return text.split(" ", 1)[0]
    return text
