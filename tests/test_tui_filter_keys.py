"""#19.4: the filter keeps up and never misroutes a key. Typing is applied once it
pauses, a large view is computed off the event loop, and keys typed in a burst — `/`,
the filter, Enter, then an action key — each land where the operator meant."""

from __future__ import annotations

from pathlib import Path

from textual import events

from console.tui.app import ConsoleApp
from console.tui.views import FilterInput
from console.tui.widgets.task_table import OFF_LOOP_ROWS, TaskTable
from tests.conftest import append, task_record
from tests.test_tui import Notes, wait_for


def _burst(app: ConsoleApp, keys: str | list[str]) -> None:
    """Keys as a fast typist (or a paste into the terminal) sends them: all posted
    before the app has handled the first, as the terminal driver does."""
    names = {"/": "slash", "\r": "enter", "\x1b": "escape", ":": "colon", " ": "space"}
    for key in keys:
        if len(key) == 1:
            app.post_message(events.Key(names.get(key, key), key if key != "\r" else "\r"))
        else:
            app.post_message(events.Key(key, None))


async def test_keys_typed_in_a_burst_land_where_meant(project: Path) -> None:
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           *(task_record(f"D{i}", "done") for i in range(5)),
           *(task_record(f"F{i}", "failed") for i in range(5)))
    app = ConsoleApp(project)
    notes = Notes()
    async with app.run_test(size=(120, 30), message_hook=notes) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == 10)
        _burst(app, ["/", *"state:done", "\r", "r"])  # r: retry the selected task
        await wait_for(pilot, lambda: notes.said("only a failed task can be retried"))
        box = app.query_one("#filter", FilterInput)
        assert box.value == "state:done" and not box.display  # the r never reached it
        assert table.row_count == 5 and table.has_focus
        # and `/` then typing at once: every key is the filter's, none an action
        _burst(app, ["/", "x"])
        await wait_for(pilot, lambda: box.has_focus and box.value.endswith("x"))
        assert not notes.said("can be cancelled")  # x, cancel on the table, did not fire
        _burst(app, ["\x1b", "x"])  # Esc clears and closes; the x after it is the table's
        await wait_for(pilot, lambda: notes.said("can be cancelled"))  # refused: it is done
        assert not box.display and app.screen.filter_text == "" and table.row_count == 10


async def test_a_large_view_is_filtered_off_the_loop_and_the_last_text_wins(
        project: Path) -> None:
    count = OFF_LOOP_ROWS + 1000
    append(project / ".sdd" / "runtime" / "tasks.jsonl",
           *(task_record(f"T{i:05d}", "done" if i % 3 else "failed") for i in range(count)))
    app = ConsoleApp(project)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(TaskTable)
        await wait_for(pilot, lambda: table.row_count == count, timeout=30)
        await pilot.press("slash")
        _burst(app, [*"state:failed"])
        await wait_for(pilot, lambda: table.row_count == len(range(0, count, 3)), timeout=20)
        await pilot.press(*["backspace"] * len("failed"))  # (a binding: not in a burst)
        _burst(app, [*"done"])
        await wait_for(pilot, lambda: table.row_count == count - len(range(0, count, 3)),
                       timeout=20)
        assert app.screen.filter_text == "state:done"
        assert all(table.rows[i].status == "done" for i in table.task_ids[:50])
