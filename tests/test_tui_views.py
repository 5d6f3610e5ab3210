"""Keyed tables and views built off the event loop (#18.6): every DataTable is synced by
key (stale rows removed, changed cells updated, new rows added, re-sorted, the cursor
kept on its row), and the screens' derived views are built in worker threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from console.sdd.state import State
from console.tui.app import ConsoleApp
from console.tui.quality import Quality
from console.tui.screens.chains import ChainsScreen
from console.tui.screens.quality import QualityScreen
from console.tui.widgets.list_table import sync_rows
from tests.conftest import append, task_record
from tests.test_tui import plain, wait_for


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable(cursor_type="row")


def _rows(*keys: str, changed: str = "") -> list[tuple[str, list[Text]]]:
    return [(key, [Text(key), Text("new" if key == changed else "old")]) for key in keys]


def _shown(table: DataTable[Text]) -> list[tuple[str, str]]:
    return [(str(row.key.value), str(table.get_row(row.key)[1])) for row in table.ordered_rows]


async def test_sync_removes_updates_adds_and_reorders_keeping_the_cursor() -> None:
    app = _Table()
    async with app.run_test() as pilot:
        table = app.query_one(DataTable)
        table.add_column("Key", key="key")
        table.add_column("Value", key="value")
        sync_rows(table, _rows("a", "b", "c"))
        table.move_cursor(row=1)  # on b
        await pilot.pause()
        sync_rows(table, _rows("d", "c", "b", changed="b"))  # a left, d is new, order flips
        assert _shown(table) == [("d", "old"), ("c", "old"), ("b", "new")]
        assert table.ordered_rows[table.cursor_row].key.value == "b"  # followed its row
        same = table.get_cell("c", "value")
        sync_rows(table, _rows("d", "c", "b", changed="b"))
        assert table.get_cell("c", "value") is same  # an unchanged cell is left alone
        sync_rows(table, [])
        assert table.row_count == 0


def _chain(chain_id: str, task: str, at: float) -> dict[str, object]:
    return {"chain_id": chain_id, "task_id": task, "role": "qa", "final_model": "haiku",
            "succeeded": True, "total_cost_usd": 0.01, "saved_vs_direct_opus_usd": 0.02,
            "timestamp": at, "attempts": [{"model": "haiku", "attempt_number": 1,
                                           "success": True, "cost_usd": 0.01}]}


async def test_the_chains_screen_follows_new_and_removed_chains(project: Path) -> None:
    chains = project / ".sdd" / "metrics" / "cascade_chains.jsonl"
    append(chains, _chain("ch1", "t1", 100.0), _chain("ch2", "t2", 200.0))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.loaded)
        await pilot.press("C")
        await wait_for(pilot, lambda: isinstance(app.screen, ChainsScreen))
        table = app.screen.query_one(DataTable)

        def keys() -> list[str]:
            return [str(row.key.value) for row in table.ordered_rows]

        await wait_for(pilot, lambda: keys() == ["ch2", "ch1"])  # newest first
        append(chains, _chain("ch3", "t3", 300.0))
        await wait_for(pilot, lambda: keys() == ["ch3", "ch2", "ch1"])  # at the top
        chains.write_text(json.dumps(_chain("ch1", "t1", 100.0)) + "\n")  # the rest gone
        await wait_for(pilot, lambda: keys() == ["ch1"])
        assert "1 chains" in plain(app.screen.query_one("#chains-totals"))


async def test_quality_is_computed_in_a_worker_thread(project: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import console.tui.screens.quality as quality_screen

    threads: list[str] = []
    real = quality_screen.quality_of

    def watched(state: State) -> Quality:  # the real computation, watched
        threads.append(threading.current_thread().name)
        return real(state)

    monkeypatch.setattr(quality_screen, "quality_of", watched)
    tasks = project / ".sdd" / "runtime" / "tasks.jsonl"
    append(tasks, task_record("d1", "done"), task_record("f1", "failed"))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.loaded)
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, QualityScreen))
        await wait_for(pilot, lambda: "1 of 2 finished" in plain(app.screen.query_one("#quality")))
        append(tasks, task_record("d2", "done"))  # a new batch: computed again, off the loop
        await wait_for(pilot, lambda: "2 of 3 finished" in plain(app.screen.query_one("#quality")))
    assert len(threads) >= 2
    assert threading.main_thread().name not in threads
