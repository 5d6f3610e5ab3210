"""What the screens' views cost, and where (#18.6).

- `sync_rows` on the chains table (1,000 rows, the newest first) when one chain
  arrives: it lands on top, so the table is re-sorted; against refilling the table
  (`clear()` and 1,000 `add_row`s), the other way to keep the order. Both timed on the
  event loop of a headless app, the call only.
- `quality_of` + `quality_view` on the generated large project (10,000 tasks, a million
  gate runs, 50,000 chains): the time the Quality screen took on the event loop for
  every batch of task changes before it moved to a worker thread (now 0 there).

`python -m benchmarks.views` prints the figures.
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from benchmarks.common import Figure, dataset
from console.tui.widgets.list_table import Row, sync_rows

COLUMNS = ("chain", "task", "role", "ladder", "outcome", "cost", "saved", "why")


def _rows(newest: int, count: int) -> list[Row]:
    return [(f"ch{n:06d}", [Text(f"ch{n:06d}"), *(Text(f"{c} {n}") for c in COLUMNS[1:])])
            for n in range(newest, newest - count, -1)]


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row")


async def _table_ms(runs: int) -> tuple[list[float], list[float]]:
    synced: list[float] = []
    refilled: list[float] = []
    app = _Table()
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.query_one(DataTable)
        for key in COLUMNS:
            table.add_column(key, key=key)
        sync_rows(table, _rows(1000, 1000))
        await pilot.pause()
        for run in range(runs):
            rows = _rows(1001 + run, 1000)  # one new chain on top, the oldest gone
            start = time.perf_counter()
            sync_rows(table, rows)
            synced.append((time.perf_counter() - start) * 1e3)
            await pilot.pause()
            start = time.perf_counter()
            with app.batch_update():
                table.clear()
                for key, cells in rows:
                    table.add_row(*cells, key=key)
            refilled.append((time.perf_counter() - start) * 1e3)
            await pilot.pause()
    return synced, refilled


def _quality_ms(runs: int) -> list[float]:
    from console.sdd.source import LocalSource
    from console.tui.quality import quality_of
    from console.tui.screens.quality import quality_view

    source = LocalSource(dataset("large"))
    source.load()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        quality_view(quality_of(source.state), None)
        samples.append((time.perf_counter() - start) * 1e3)
    return samples


def run(quick: bool) -> list[Figure]:
    synced, refilled = asyncio.run(_table_ms(5 if quick else 20))
    return [
        Figure("chains table, one new chain: sync_rows", "ms", synced,
               notes={"clear and refill": f"{min(refilled):.1f} ms"}),
        Figure("quality view, 10k tasks / 1M gate runs", "ms", _quality_ms(2 if quick else 5),
               notes={"on the event loop": "0 ms (worker thread)"}),
    ]


if __name__ == "__main__":
    for figure in run(quick=False):
        notes = ", ".join(f"{k}={v}" for k, v in figure.notes.items())
        print(f"{figure.name:<42} median {figure.median:8.2f} {figure.unit}  "
              f"p99 {figure.p99:8.2f} {figure.unit}  {notes}")
